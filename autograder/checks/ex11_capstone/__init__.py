"""Checks for exercise 11, the capstone: train real models with the learner's own code, one module per part.

* :mod:`.logsumexp` (A) and :mod:`.moons` (B) run on the learner's exercise-02 ``Value`` engine: a new operation,
  one node of many inputs whose backward the learner derives, then training an MLP on two moons generated in code,
  to a clean boundary (:mod:`.value_mlp`: the helpers they share);
* :mod:`.norm` (C.1: the row-wise Euclidean norm's backward, at its kink and where its squares leave float64's
  range) and :mod:`.residual` (C.2: a residual block's forward and backward, SiLU in its branch, held to a memory
  budget on what the forward saves, with the learner's SiLU backward that Part E's given code calls, checked by
  :mod:`.silu`),
  :mod:`.batchnorm` (D: batch normalisation by hand, training-mode batch statistics against evaluation-mode running
  statistics), :mod:`.bughunt` (E: a given backward of the digits network Linear -> BatchNorm -> SiLU -> Linear that
  trains and has a planted bug, found with a gradcheck gate, its error measured against the batch size, and fixed) and
  :mod:`.digits` (F: training the network on the handwritten digits with global-norm clipping and a gradcheck gate)
  on hand-derived tensor backward passes;
  :mod:`.network` holds the network itself and its right backward;
* :mod:`.misconceptions`: every mistake the six parts name.

Autograd is forbidden wherever a part computes gradients itself; the checks count backward passes to tell. Every pass
mark (MOONS_ACCURACY, DIGITS_ACCURACY) sits below the worst the reference reaches over many draws of the hidden
tests' cases and above the best a barely trained model reaches: ``python -m tools.capstone_margins`` measures both.

Learners whose earlier work is broken may use the course's references (:mod:`autograder.references`), clearly marked
as such in the notebook: the capstone never blocks on an earlier exercise. Until a learner pastes their code, the
notebook's names hold :func:`~autograder.checking.not_pasted` placeholders, so an untouched notebook fails every test
with "Not written yet", never a NameError.
"""

from .batchnorm import BN_EPS, batchnorm, check_batchnorm_backward, check_batchnorm_forward
from .bughunt import check_bug_hunt
from .digits import DIGITS_ACCURACY, accuracy, check_train_digits
from .hints import hint
from .logsumexp import check_logsumexp
from .moons import MOONS_ACCURACY, MOONS_BUDGET, check_train_moons, try_train_moons
from .network import DIGITS_KEYS, mlp_logits, mlp_loss
from .norm import check_norm_backward
from .residual import check_residual_backward
from .silu import check_silu_backward

__all__ = ["BN_EPS", "DIGITS_ACCURACY", "DIGITS_KEYS", "MOONS_ACCURACY", "MOONS_BUDGET", "accuracy", "batchnorm",
           "check_batchnorm_backward", "check_batchnorm_forward", "check_bug_hunt", "check_logsumexp",
           "check_norm_backward", "check_residual_backward", "check_silu_backward", "check_train_digits",
           "check_train_moons", "hint", "mlp_logits", "mlp_loss", "try_train_moons"]
