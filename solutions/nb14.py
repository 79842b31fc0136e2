"""Reference solutions of notebook 14's exercises, and answers its checks must refuse."""

SOLUTIONS = {
    "ex2-answer-14": '''
def transform_and_copy_back(chunks, w, reps, outs):
    main, side = streams.current_stream(), streams.Stream()
    for d, h in zip(chunks, outs):
        y = streams.transform(d, w, reps)          # on the main stream
        done = streams.Event()
        done.record(main)
        side.wait_event(done)                 # the copy back waits for this chunk's compute only
        with streams.stream(side):
            h.copy_(y, non_blocking=True)
        streams.record_stream(y, side)             # y is read on the side stream
    side.synchronize()                        # the caller reads outs next
''',
    "ex1-answer-14": '''
def train_no_sync(model, opt, batches):
    losses, correct = [], torch.zeros((), dtype=torch.long, device=utils.DEVICE)
    for x, y in batches:
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        correct += (logits.argmax(1) == y).sum()
    return torch.stack(losses), correct
''',
    "ex3-answer-14": '''
def staged_ms(nbytes, chunk, memcpy_gbs, link_gbs):
    m, l = chunk / memcpy_gbs / 1e6, chunk / link_gbs / 1e6     # one chunk's memcpy and transfer, ms
    return m + l + (nbytes // chunk - 1) * max(m, l)            # fill, then the slower stage sets the pace
''',
}

CHEATS = {
    "ex2-answer-14": {
        "one stream (the serial version)": "transform_and_copy_back = streams.back_serial",
        "a side stream with no event between compute and copy": '''
def transform_and_copy_back(chunks, w, reps, outs):
    side = streams.Stream()
    for d, h in zip(chunks, outs):
        y = streams.transform(d, w, reps)
        with streams.stream(side):
            h.copy_(y, non_blocking=True)
    side.synchronize()
''',
        "copies only, no transform": '''
def transform_and_copy_back(chunks, w, reps, outs):
    main, side = streams.current_stream(), streams.Stream()
    side.wait_stream(main)
    with streams.stream(side):
        for d, h in zip(chunks, outs):
            h.copy_(d, non_blocking=True)
    side.synchronize()
''',
    },
    "ex1-answer-14": {
        "the loop as given": "train_no_sync = ts.loop_to_fix",
        "one synchronisation left": '''
def train_no_sync(model, opt, batches):
    losses, correct = [], 0
    for x, y in batches:
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        losses.append(loss.detach())
        correct += int((logits.argmax(1) == y).sum())
    return torch.stack(losses), correct
''',
        "no training (forward only)": '''
def train_no_sync(model, opt, batches):
    losses, correct = [], 0
    for x, y in batches:
        logits = model(x)
        losses.append(torch.nn.functional.cross_entropy(logits, y).detach())
        correct = correct + (logits.argmax(1) == y).sum()
    return torch.stack(losses), correct
''',
    },
    "ex3-answer-14": {
        "the package's function": "staged_ms = dm.staged_copy_ms",
        "a function calling the package's": "staged_ms = lambda n, c, m, l: dm.staged_copy_ms(n, c, m, l)",
        "no pipelining (the two steps one after the other)":
            "staged_ms = lambda n, c, m, l: n / m / 1e6 + n / l / 1e6",
        "the steady pace only (no fill)": "staged_ms = lambda n, c, m, l: n / min(m, l) / 1e6",
        "a number": "staged_ms = 21.3",
    },
}
