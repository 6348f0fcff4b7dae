"""Names and timings shared by the stand-in's modules (from the contract)."""

# The nine kinds of shared-memory segment, in the order the lookup and cleanup visit them.
LOCALS = 'locals'
BARRIER = 'barrier'
NEXT_EPOCH = 'next_epoch'
CACHE_USAGE = 'cache_usage'
SHARD_STATES = 'shard_states'
SHARD_ACCESS_TIMES = 'shard_access_times'
RESUME = 'resume'
EPOCH_SHAPE = 'epoch_shape'
EPOCH_DATA = 'epoch_data'

SHM_TO_CLEAN = (LOCALS, BARRIER, NEXT_EPOCH, CACHE_USAGE, SHARD_STATES, SHARD_ACCESS_TIMES, RESUME,
                EPOCH_SHAPE, EPOCH_DATA)

# Lock files in $TMPDIR, never deleted by anyone.
BARRIER_FILELOCK = 'barrier_filelock'
CACHE_FILELOCK = 'cache_filelock'

# Every poll sleeps one tick.
TICK = 0.007
