#!/usr/bin/env bash
# Regenerates the committed seed corpora in fuzz/corpus/ from readable text (protoc --encode
# for protobuf seeds). Run from anywhere; needs protoc and python3. The seeds are committed so
# CI does not depend on this script.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
c=$root/fuzz/corpus
mkdir -p "$c"/{worker_stream_fuzzer,ncu_csv_fuzzer,config_fuzzer,request_fuzzer}
enc() {  # enc TYPE TEXT -> binary on stdout
  printf '%s' "$2" | protoc -I "$root/proto" --encode="medprof.v1.$1" \
    "$root/proto/medprof/v1/service.proto" "$root/proto/medprof/v1/results.proto" "$root/proto/medprof/v1/workload.proto"
}
delimited() {  # varint length + bytes of each file argument, concatenated
  python3 -c '
import sys
out = bytearray()
for p in sys.argv[1:]:
    b = open(p, "rb").read()
    n = len(b)
    while True:
        x = n & 0x7f; n >>= 7
        out.append(x | (0x80 if n else 0))
        if not n: break
    out += b
sys.stdout.buffer.write(out)' "$@"
}
t=$(mktemp -d)
enc WorkerMessage 'started { backend: "cpu" environment { gpu_name: "cpu" host: "node-1" } started_unix_ms: 1764680000000 }' >"$t/1"
enc WorkerMessage 'progress { message: "step 2 of 3" }' >"$t/2"
enc WorkerMessage 'step { phase: PHASE_TRAIN wall_ns: 4000000 phase_ns { key: "fwd" value: 1500000 } }' >"$t/3"
enc WorkerMessage 'kernels { kernels { name: "sm90_xmma_fprop" category: "conv" count: 12 total_ns: 900000 min_ns: 70000 max_ns: 80000 grid: [128, 1, 1] block: [256, 1, 1] registers: 128 } steps: 3 }' >"$t/4"
enc WorkerMessage 'summary { measured_steps: 3 step_ms_median: 4.0 step_ms_mean: 4.1 final_loss: 0.25 }' >"$t/5"
enc WorkerMessage 'error { kind: "out_of_memory" message: "CUDA out of memory" }' >"$t/6"
delimited "$t/1" "$t/2" "$t/3" "$t/4" "$t/5" >"$c/worker_stream_fuzzer/run_ok"
delimited "$t/1" "$t/6" >"$c/worker_stream_fuzzer/run_oom"
head -c 40 "$c/worker_stream_fuzzer/run_ok" >"$c/worker_stream_fuzzer/cut_short"
printf '\xff\xff\xff\xff\x0f' >"$c/worker_stream_fuzzer/oversized_prefix"

cp "$root/tests/testdata/ncu/tiny_raw.csv" "$c/ncu_csv_fuzzer/tiny_raw.csv"
printf '"ID","Kernel Name","gpu__time_duration.sum"\n"","","nsecond"\n"0","k","1,024"\n' >"$c/ncu_csv_fuzzer/minimal.csv"
printf '==PROF== Connected\n"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed"\n"","","usecond","%%"\n"0","a","2.5","n/a"\n"1","b ""quoted""","1.0","45.5"\n' >"$c/ncu_csv_fuzzer/quotes_na.csv"

printf '\x00{"volume": 16, "baseChannels": 8, "channelMult": [1, 2], "steps": 3, "warmup": 1}' >"$c/config_fuzzer/config_tiny"
printf '\x00{"preset": "opt12", "volume": 128, "phase": "PHASE_SAMPLE", "tf32": true}' >"$c/config_fuzzer/config_preset"
printf '\x01gpu=H100,site=tacc,label.queue=gpu-a100' >"$c/config_fuzzer/selector"
printf '\x01arch=9.0,device=cuda' >"$c/config_fuzzer/selector_arch"
printf '\x02127.0.0.1:7000' >"$c/config_fuzzer/listen_v4"
printf '\x02[::1]:0' >"$c/config_fuzzer/listen_v6"
printf '\x03normal' >"$c/config_fuzzer/synchronous"
printf '\x04\x30\x75\x00\x00\x00\x00\x00\x00\x88\x13\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00' >"$c/config_fuzzer/domain_options"
printf '\x05train' >"$c/config_fuzzer/phase"

req() {  # req KIND_BYTE NAME TYPE TEXT
  { printf "%b" "$1"; enc "$3" "$4"; } >"$c/request_fuzzer/$2"
}
req '\x00' submit SubmitStudyRequest 'name: "tf32 study" presets: ["baseline", "opt1"] config { volume: 16 base_channels: 8 channel_mult: [1, 2] steps: 3 warmup: 1 } targets: ["gpu=H100"] repeats: 2'
req '\x00' submit_cpu SubmitStudyRequest 'presets: ["opt2"] config { volume: 16 base_channels: 8 channel_mult: [1, 2] steps: 3 device: DEVICE_KIND_CPU } targets: ["device=cpu"]'
req '\x01' register RegisterRequest 'protocol_version: PROTOCOL_VERSION_1 agent_name: "node-2" host: "h" devices { index: 0 kind: "cuda" name: "NVIDIA H200" compute_capability: "9.0" } labels { key: "site" value: "tacc" }'
req '\x02' heartbeat HeartbeatRequest 'running_run_ids: ["run-000000000001"] draining: false'
req '\x03' acquire AcquireJobRequest 'free_device_indexes: [-1]'
req '\x04' chunk ResultChunk 'run_id: "run-000000000001" seq: 1 message { step { phase: PHASE_TRAIN wall_ns: 1000 } }'
req '\x05' finish FinishRunRequest 'run_id: "run-000000000001" state: RUN_SUCCEEDED last_seq: 1'
req '\x06' list_studies ListStudiesRequest 'limit: 10 page_token: "5"'
req '\x07' list_runs ListRunsRequest 'limit: 10'
req '\x08' cancel CancelStudyRequest 'study_id: "st-000000000001" reason: "by request"'
printf '\x09Bearer mpt_0123456789ab_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef' >"$c/request_fuzzer/bearer"
rm -rf "$t"
echo "seeds: $(find "$c" -type f | wc -l) files in $c"
