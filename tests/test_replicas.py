"""The threads-and-barrier simulation of data-parallel training that lesson 03 runs (autograder/replicas.py)."""

from __future__ import annotations

import threading

import matplotlib
import pytest
import torch

from autograder import replicas

matplotlib.use("Agg")


def post_accumulate_sync(params, rank, collective, note):
    """DDP's way: average .grad right after backward has written it."""
    for name, param in params.items():
        def sync(param, name=name):
            note(f"{name}: enter all-reduce")
            param.grad = collective.average(rank, name, param.grad)
            note(f"{name}: all-reduce done")

        param.register_post_accumulate_grad_hook(sync)


def tensor_hook_sync(params, rank, collective, note):
    """The other way: replace the gradient before it reaches .grad."""
    for name, param in params.items():
        param.register_hook(lambda grad, name=name: collective.average(rank, name, grad))


@pytest.mark.parametrize("attach", [post_accumulate_sync, tensor_hook_sync])
@pytest.mark.parametrize("ranks", [2, 4])
def test_a_healthy_step_leaves_the_large_batch_gradient_on_every_rank(attach, ranks):
    world = replicas.run_world(attach, [True] * ranks)
    large_batch = replicas.Problem.make().gradient()
    for name, expected in large_batch.items():
        for rank in range(ranks):
            torch.testing.assert_close(world.replicas[rank][name].grad, expected, rtol=1e-12, atol=1e-14)
        assert all(torch.equal(world.replicas[r][name].grad, world.replicas[0][name].grad) for r in range(ranks))


def test_micro_batches_accumulate_and_pay_one_all_reduce_each():
    world = replicas.run_world(post_accumulate_sync, [True, True], micro_batches=2)
    for name, expected in replicas.Problem.make().gradient().items():
        torch.testing.assert_close(world.replicas[0][name].grad, expected, rtol=1e-12, atol=1e-14)
    assert world.events(0).count("W1: enter all-reduce") == 2 and world.events(0).count("backward done") == 2


def test_the_last_layer_is_synchronised_first_while_backward_goes_on():
    world = replicas.run_world(post_accumulate_sync, [True, True])
    expected = ["backward starts", "W2: enter all-reduce", "W2: all-reduce done", "W1: enter all-reduce",
                "W1: all-reduce done", "backward done"]
    assert world.events(0) == world.events(1) == expected


def test_a_rank_that_never_reaches_backward_stalls_the_others_until_the_timeout():
    world = replicas.run_world(post_accumulate_sync, [True, False], timeout=0.2)
    assert world.events(0) == ["backward starts", "W2: enter all-reduce", "gave up waiting (BrokenBarrierError)"]
    assert world.events(1) == ["never calls backward"]
    waited = world.time_of(0, "gave up waiting (BrokenBarrierError)") - world.time_of(0, "W2: enter all-reduce")
    assert waited >= 0.2
    own = replicas.Problem.make().gradient(slice(0, 4))
    assert torch.equal(world.replicas[0]["W2"].grad, own["W2"])  # written before the hook blocked: not averaged
    assert world.replicas[0]["W1"].grad is None                   # never computed


def test_the_toy_all_reduce_averages_and_copies():
    collective = replicas.ToyAllReduce(2, timeout=1.0)
    results = {}
    values = {0: torch.tensor([1.0, 2.0]), 1: torch.tensor([3.0, 6.0])}

    def rank(r):
        results[r] = collective.average(r, "w", values[r])

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert torch.equal(results[0], torch.tensor([2.0, 4.0])) and torch.equal(results[1], results[0])
    values[0].zero_()
    assert torch.equal(collective.inbox["w", 0], torch.tensor([1.0, 2.0]))  # it kept its own copy


def test_the_pictures_draw():
    from matplotlib.figure import Figure

    healthy = replicas.run_world(post_accumulate_sync, [True, True])
    axes = Figure().subplots(1, 2)
    replicas.plot_lanes(healthy, axes[0], "healthy")
    replicas.plot_arrivals([("complete", "dL/dL", 1.0), ("sent", "q -> x", 24.0)], axes[1])
    assert axes[0].get_title() == "healthy" and len(axes[1].collections) == 2
