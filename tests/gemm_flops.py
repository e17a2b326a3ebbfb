"""GEMM FLOPs per ProfilerStep of a torch.profiler trace, from its own `Input Dims`: for every
launch of a GEMM kernel, the innermost matrix-product operator around it on its thread counts
once (2 x M x N x K), in the step its first such launch lies in."""
import gzip, json, sys, collections
opener = gzip.open if sys.argv[1].endswith('.gz') else open
trace = json.load(opener(sys.argv[1]))
events = trace['traceEvents']
steps = sorted((e['ts'], e['ts'] + e['dur']) for e in events if e.get('name', '').startswith('ProfilerStep#'))
gemm = {e['args'].get('correlation') for e in events if e.get('cat') == 'kernel'
        and any(x in e['name'].lower() for x in ('gemm', 'gemv', 'nvjet', 'xmma', 'splitkreduce', 'cublas'))}
ops = collections.defaultdict(list)
for e in events:
    if e.get('cat') == 'cpu_op' and e['name'] in ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::linear'):
        ops[e['tid']].append(e)
def flops(e):
    dims = e['args']['Input Dims']
    if e['name'] == 'aten::linear':
        rows = 1
        for x in dims[0][:-1]:
            rows *= x
        return 2 * rows * dims[0][-1] * dims[1][0]
    a, b = (dims[0], dims[1]) if e['name'] in ('aten::mm', 'aten::bmm') else (dims[1], dims[2])
    return 2 * a[0] * a[1] * b[1] if len(a) == 2 else 2 * a[0] * a[1] * a[2] * b[2]
first = {}
for e in events:
    if e.get('cat') in ('cuda_runtime', 'cuda_driver') and e['args'].get('correlation') in gemm:
        around = [o for o in ops[e['tid']] if o['ts'] <= e['ts'] <= o['ts'] + o['dur']]
        if around:
            op = max(around, key=lambda o: (o['ts'], -o['dur']))
            key = (op['tid'], op['ts'], op['name'])
            first[key] = min(first.get(key, (e['ts'], op))[0], e['ts']), op
total = [0] * len(steps)
for t, op in first.values():
    for k, (s, end) in enumerate(steps):
        if s <= t <= end:
            total[k] += flops(op)
print(json.dumps(total))
