#!/usr/bin/env python3
"""Replays the metrics layer's signature choice and aggregation on Nsight Compute's own per-launch
values: which coverage and per-kernel cap bring the kernel-level values within tolerance.
  coverage_replay.py RUN.jsonl NCU.csv   (the run: medprof-worker --decode; ncu: agreement.sh's CSV)
'time' extrapolates counters by trace time (medprof's rule); 'auto' by blocks where that varies less."""
import os, sys, collections
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '../../gpu'))
import ncu_agree
from ncu_agree import dims, agree, weighted, METRICS
from ncu_compare import norm
def sim(runf, ncuf, cov, cap, mode):
    run=ncu_agree.load_run(runf); ncu=ncu_agree.load_ncu(ncuf)
    ok=tot=0; bad=[]
    for name in run['top'][:10]:
        key=norm(name)
        sigs=[s for s in run['signatures'].values() if s['kernel']==name]
        # per (grid,block) ordinals
        bykey=collections.defaultdict(list)
        for s in sigs:
            for o in s.get('ordinals',[]): bykey[(dims(s.get('grid')),dims(s.get('block')))].append(o)
        for k in bykey: bykey[k].sort()
        same=collections.defaultdict(list)
        for (kk,g,b,v) in ncu:
            if kk==key: same[(g,b)].append(v)
        sigs.sort(key=lambda s:-int(s['total_ns']))
        T=sum(int(s['total_ns']) for s in sigs)
        meas=[]; acc=0
        for s in sigs:
            if len(meas)>=cap or (meas and acc>=cov*T): break
            meas.append(s); acc+=int(s['total_ns'])
        def val(s, first=True):
            k=(dims(s.get('grid')),dims(s.get('block')))
            o=min(s['ordinals']); pos=bykey[k].index(o)
            l=same[k]
            return l[pos] if pos<len(l) else None
        steps=3
        truth=weighted([v for l in same.values() for v in l])
        agg={}
        C=acc/T
        for m,(_,pct) in METRICS.items():
            rows=[(s,val(s)) for s in meas]
            rows=[(s,v) for s,v in rows if v and m in v]
            if not rows: continue
            if pct:
                w=[v['duration_ns']*int(s['count'])/steps for s,v in rows]
                agg[m]=sum(v[m]*wi for (s,v),wi in zip(rows,w))/sum(w)
            else:
                S=sum(v[m]*int(s['count'])/steps for s,v in rows)
                if mode=='time':
                    agg[m]=S/C
                else:
                    blocks=lambda s: dims(s.get('grid'))[0]*dims(s.get('grid'))[1]*dims(s.get('grid'))[2]*int(s['count'])/steps
                    Bm=sum(blocks(s) for s,v in rows); Ball=sum(blocks(s) for s in sigs)
                    tm=sum(int(s['total_ns'])/steps for s,v in rows)
                    # choose predictor with lower weighted CV
                    def cv(xs,ws):
                        mu=sum(x*w for x,w in zip(xs,ws))/sum(ws)
                        return (sum(w*(x-mu)**2 for x,w in zip(xs,ws))/sum(ws))**.5/mu if mu else 0
                    pb=[v[m]/ (blocks(s)/int(s['count'])*steps) for s,v in rows]; pt=[v[m]/v['duration_ns'] for s,v in rows]
                    ws=[int(s['total_ns']) for s,v in rows]
                    use_b = len(rows)>1 and cv(pb,ws)<cv(pt,ws) and mode=='auto'
                    if m=='duration_ns' or m=='sm_cycles': use_b=False
                    agg[m]= S + (S/Bm*(Ball-Bm) if use_b else S/tm*(T/steps-tm))
        for m in METRICS:
            if m in agg and m in truth:
                tot+=1; a,sh=agree(m,agg[m],truth[m]); ok+=a
                if not a: bad.append(f'{name[:50]} {m} {sh}')
    return ok,tot,bad
for cov,cap in [(0.9,8),(0.95,16),(0.98,32),(0.99,32),(0.99,64),(1.0,99)]:
    for mode in ['time','auto']:
        ok,tot,bad=sim(sys.argv[1],sys.argv[2],cov,cap,mode)
        print(cov,cap,mode,ok,tot,bad[:6])
