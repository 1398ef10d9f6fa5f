// Status helpers shared by every medprof component.
//
// medprof code returns absl::Status / absl::StatusOr<T>; exceptions are caught only at foreign
// borders (LibTorch, JSON parsing) and converted there. These macros keep call sites short:
//
//   MEDPROF_RETURN_IF_ERROR(store->Commit());
//   MEDPROF_ASSIGN_OR_RETURN(auto db, Db::Open(path));
//
// Header-only, no dependencies beyond Abseil. Thread-safe (stateless).
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define MEDPROF_STATUS_CONCAT_INNER_(a, b) a##b
#define MEDPROF_STATUS_CONCAT_(a, b) MEDPROF_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function with the status of `expr` when it is not OK.
#define MEDPROF_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status medprof_status_ = (expr);           \
    if (!medprof_status_.ok()) return medprof_status_; \
  } while (false)

// Evaluates a StatusOr expression; on error returns its status, else moves the value into `lhs`.
#define MEDPROF_ASSIGN_OR_RETURN(lhs, expr) \
  MEDPROF_ASSIGN_OR_RETURN_IMPL_(MEDPROF_STATUS_CONCAT_(medprof_statusor_, __LINE__), lhs, expr)
#define MEDPROF_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

namespace medprof {

// Prefixes a status message with context, keeping its code: "opening db: <original>".
inline absl::Status Annotate(const absl::Status& s, absl::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

}  // namespace medprof
