"""Checks for exercise 05, gradients accumulate, one module per part group: an accumulating training loop over a
ragged epoch of padded sequences (Part A) and where zero_grad() sat in a run, read from a float32 log of its weights
(Part B), in :mod:`.loop`; one simultaneous update of a generator and a critic from one forward and one backward pass
through the critic (Part C), in :mod:`.duel`; :mod:`.hints` holds the hint book.
"""

from .duel import check_adversarial_step, critic_loss, generator_loss
from .hints import hint
from .loop import PAD, check_read_weight_log, check_train, token_loss

__all__ = ["PAD", "check_adversarial_step", "check_read_weight_log", "check_train", "critic_loss", "generator_loss",
           "hint", "token_loss"]
