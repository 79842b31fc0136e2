"""Reference solutions of notebook 02's exercises, and answers its checks must refuse."""

SOLUTIONS = {
    "ex02-1-answer": '''
def ops_called_by(fn):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {c.name for e in p.events() if e.cpu_parent is None and e.name.startswith("aten::")
            for c in e.cpu_children}
''',
    "ex02-2-answer": '''
def top_level_ops(fn):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {e.name for e in p.events() if e.cpu_parent is None and e.name.startswith("aten::")}
''',
    "ex02-3-answer": '''
def recorded_steps(wait, warmup, active):
    first = wait + warmup          # skipped steps, then warm-up steps whose events are dropped
    return list(range(first, first + active))
''',
}

CHEATS = {
    "ex02-1-answer": {
        "the answer printed in section 1": "ops_called_by = {'aten::pow'}",
        "a function returning that answer": "ops_called_by = lambda fn: {'aten::pow'}",
        "the check's own reference": "ops_called_by = lambda fn: called_by_top_level(fn)",
        "the top level instead of its children": '''
def ops_called_by(fn):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {e.name for e in p.events() if e.cpu_parent is None and e.name.startswith("aten::")}
''',
    },
    "ex02-2-answer": {
        "a set typed in": "top_level_ops = {'aten::sum', 'aten::div'}",
        "a function returning it": "top_level_ops = lambda fn: {'aten::sum', 'aten::div'}",
        "the check's own reference": "top_level_ops = operators_at_the_top",
        "every operator, not only the top level": '''
def top_level_ops(fn):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {e.name for e in p.events() if e.name.startswith("aten::")}
''',
    },
    "ex02-3-answer": {
        "the steps printed in section 4": "recorded_steps = [2, 3]",
        "warm-up steps counted as recorded": "recorded_steps = lambda wait, warmup, active: list(range(wait, wait + warmup + active))",
        "the check's own reference": "recorded_steps = lambda w, u, a: steps_the_profiler_kept(w, u, a)",
    },
}
