// zero's resumable checkpoints: the engine's shards (fp32 master weights and optimizer state) as
// one safetensors file per rank, each tensor tagged with the global element range of its unit it
// covers, plus zero_checkpoint.json (what wrote it, the units, every file's size and checksum,
// the engine's TrainingState). Because ranges are global, a checkpoint loads into any world size
// and any ZeRO stage: a rank reads the pieces that intersect the range it owns.
//
// One header per part; this one includes them all:
//   checkpoint_index.h       zero_checkpoint.json, the file names, the checksum
//   checkpoint_save.h        CheckpointSave: staging folder, shard files, index, commit
//   durable_write.h          write_file_atomically, fsync_path
//   checkpoint_validation.h  check_complete, validate: a folder complete and undamaged
//   resharding_load.h        load into an engine of any world and stage; read_unit(s)
//   checkpoint_folders.h     resolve (a path or `latest` to a folder), rotate
#pragma once

#include "zero/checkpoint/checkpoint_folders.h"
#include "zero/checkpoint/checkpoint_index.h"
#include "zero/checkpoint/checkpoint_save.h"
#include "zero/checkpoint/checkpoint_validation.h"
#include "zero/checkpoint/durable_write.h"
#include "zero/checkpoint/resharding_load.h"
