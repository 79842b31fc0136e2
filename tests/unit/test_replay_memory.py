"""The check's memory for its own launch of a learner's kernel (gpu_course.exercises.replay.Memory): a copy of an
input counts as the input by value, and only its view does: a result hidden in the rest of the copy's storage is
not in the check's memory."""
import torch

import utils  # noqa: F401  first: the mode
from gpu_course.exercises.replay import Memory


def _storage_of(view):
    st = view.untyped_storage()
    return torch.empty(0, dtype=view.dtype).set_(st, 0, (st.nbytes() // view.element_size(),), (1,))


def test_a_copy_of_an_input_keeps_its_view_and_nothing_past_it():
    x = torch.randn(100)
    hidden = torch.relu(x + 1)                      # a result computed by torch beforehand
    copy = torch.cat([x, hidden])[:100]             # equals x by value; the result waits past its end
    mem = Memory(output=torch.empty(100), inputs=[x])
    got = mem.tensor(copy, "x")
    assert torch.equal(got, x)                      # the input, by value
    assert _storage_of(got)[100:].isnan().all()     # the rest of the storage is poisoned


def test_two_inputs_copied_into_one_storage_both_keep_their_values():
    x, y = torch.randn(50), torch.randn(70)
    both = torch.cat([x, y])
    mem = Memory(output=torch.empty(50), inputs=[x, y])
    gx, gy = mem.tensor(both[:50], "x"), mem.tensor(both[50:], "y")
    assert torch.equal(gx, x) and torch.equal(gy, y)


def test_the_check_s_own_input_is_copied_whole():
    x = torch.randn(64)
    mem = Memory(output=torch.empty(64), inputs=[x])
    assert torch.equal(mem.tensor(x, "x"), x)
