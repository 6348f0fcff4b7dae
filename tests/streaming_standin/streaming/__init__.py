"""shmstress stand-in for MosaicML Streaming's shared-memory coordination.

Only the pieces the shmstress adapter drives exist here (``streaming.base.world``,
``streaming.base.shared.{prefix,barrier,memory,array}``, ``streaming.base.util``),
written from docs/streaming.md and /work/shared/reference/streaming-contract.md.
It deliberately keeps the original's flaws: its purpose is to let the harness
show, end to end, that it detects them. Do not use it for anything else.

Difference from the original: every shm name and every lock file name this
package builds itself is prefixed with ``$SHMSTRESS_ROOT`` when that is set, so
the stand-in can run outside a private /dev/shm without touching real names.
"""

# The adapter reads these to know that names carry $SHMSTRESS_ROOT.
__shmstress_standin__ = True
SHMSTRESS_NAME_ROOT_ENV = 'SHMSTRESS_ROOT'

__version__ = '0.0.0+shmstress.standin'
