"""Reference solutions of notebook 02's exercises, and answers its checks must refuse."""

SOLUTIONS = {
    "ex02-1-answer": '''
def ops_under(fn, op):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    found = set()
    def walk(e):                        # every level below e, not only its children
        for c in e.cpu_children:
            if c.name.startswith("aten::"):
                found.add(c.name)
            walk(c)
    for e in p.events():
        if e.name == op:
            walk(e)
    return found
''',
    "ex02-2-answer": '''
def callers(fn, op):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    counts = {}
    for e in p.events():
        if e.name == op:
            parent = e.cpu_parent
            while parent is not None and not parent.name.startswith("aten::"):   # skip ranges and other rows
                parent = parent.cpu_parent
            who = parent.name if parent is not None else "Python"
            counts[who] = counts.get(who, 0) + 1
    return counts
''',
    "ex02-3-answer": '''
def recorded_steps(wait, warmup, active, repeat):
    cycle = wait + warmup + active     # every cycle waits, warms up, then records
    return [c * cycle + wait + warmup + i for c in range(repeat) for i in range(active)]
''',
}

CHEATS = {
    "ex02-1-answer": {
        "section 1's children_of, one level only": '''
def ops_under(fn, op):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {c.name for e in p.events() if e.name == op for c in e.cpu_children}
''',
        "the answer for torch.square typed in": "ops_under = lambda fn, op: {'aten::pow', 'aten::result_type', 'aten::to'}",
        "the course's reference called": "ops_under = lambda fn, op: profiling.operators_under(fn, op)",
        "every operator of the profile": '''
def ops_under(fn, op):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {e.name for e in p.events() if e.name.startswith("aten::") and e.name != op}
''',
    },
    "ex02-2-answer": {
        "section 1's cpu_parent is None, counted as Python's": '''
def callers(fn, op):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    n = sum(e.name == op and e.cpu_parent is None for e in p.events())
    return {"Python": n} if n else {}
''',
        "the direct parent's name, ranges not skipped": '''
def callers(fn, op):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    counts = {}
    for e in p.events():
        if e.name == op:
            who = e.cpu_parent.name if e.cpu_parent is not None else "Python"
            counts[who] = counts.get(who, 0) + 1
    return counts
''',
        "the table's # of Calls, all lumped together": '''
def callers(fn, op):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {"Python": e.count for e in p.key_averages() if e.key == op}
''',
        "the course's reference called": "callers = profiling.callers_of",
    },
    "ex02-3-answer": {
        "the steps printed in section 4": "recorded_steps = lambda wait, warmup, active, repeat: [2, 3]",
        "one cycle only": "recorded_steps = lambda wait, warmup, active, repeat: list(range(wait + warmup, wait + warmup + active))",
        "warm-up steps counted as recorded": '''
def recorded_steps(wait, warmup, active, repeat):
    cycle = wait + warmup + active
    return [c * cycle + wait + i for c in range(repeat) for i in range(warmup + active)]
''',
        "the wait applied to the first cycle only": '''
def recorded_steps(wait, warmup, active, repeat):
    return [wait + c * (warmup + active) + warmup + i for c in range(repeat) for i in range(active)]
''',
        "the course's reference called": "recorded_steps = profiling.steps_a_schedule_records",
    },
}
