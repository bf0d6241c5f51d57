"""Zero to JupyterHub: every user's pod runs as a uid and group of its own, so that nbgrader's exchange keeps learners
apart on Kubernetes as it does on one machine (deploy/README.md, "Learners kept apart on Kubernetes").

The chart's default runs every pod as jovyan (uid 1000): the exchange's permissions, which rely on Unix users (a
submissions folder anyone may write into and nobody but its owner may list), then protect nothing. Here a user's uid
is JupyterHub's own id for the user, offset: unique on the hub and the same at every start while the hub's database
is kept. The pod's group is the same number (a private group) and is also its fsGroup, so the home volume, which
Kubernetes gives that group, stays writable after the change from uid 1000.

deploy/z2jh/config.yaml carries this text in hub.extraConfig (tests/test_k8s_isolation.py checks the two agree and
runs nbgrader's exchange as such uids).
"""

#: The first uid given to a hub user: above the image's own (jovyan is 1000) and the nodes' usual ranges.
FIRST_UID = 200_000


def own_uid(spawner) -> int:
    """The uid (and private gid) of ``spawner``'s user: distinct for every hub user, stable across restarts."""
    return FIRST_UID + spawner.user.id


c = get_config()  # noqa: F821 - provided by traitlets when JupyterHub loads this file
c.KubeSpawner.uid = own_uid
c.KubeSpawner.gid = own_uid
c.KubeSpawner.fs_gid = own_uid
