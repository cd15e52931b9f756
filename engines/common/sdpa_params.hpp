// Host side shared by the attention engines: the compile-time codes of their templates, and the parts of
// SdpaParams that every engine fills the same way from Facts, the configuration and the bindings.
#pragma once

#include "common/params.h"
#include "engine.hpp"

namespace rime::engines {

static_assert(sizeof(SdpaParams) <= kMaxParamBytes && sizeof(CombineParams) <= kMaxParamBytes,
              "a stage's parameter block fits its ParamBlock");

// RIME_T_* of a dtype (FP32 for types no kernel template takes).
int type_code(DataType type);
// The names kernel expressions spell template arguments with (common/params.h, rime_names): "e4m3" for a type
// code, "stats | mask" for feature bits ("no_features" for none), "two_consumers" for a consumer count.
std::string kernel_type_name(int type_code);
std::string kernel_feature_names(int features);
std::string kernel_consumers_name(int consumer_warpgroups);
// The O type argument of the attention kernels: the dtype, or the block-scaled format sf_o makes of it.
int sdpa_o_type_code(const Facts& facts);
// The RIME_F_* feature bits of the attention kernels for these facts (with or without split).
int sdpa_features(const Facts& facts, bool split);

// Pointers (operands, and the split partials when the plan splits), strides, extents and mask parameters.
// Engine-specific fields (V^T, tensor maps) are the engine's to add.
SdpaParams sdpa_params(const Facts& facts, const Config& config, const Bindings& bindings);

// log2 of a paged pool's page size (a power of two, validation), as SdpaParams and the index check hold it.
int page_size_log2(int64_t page_size);

// Every value SdpaParams holds in a 32-bit int, against INT32_MAX (the engines' launch limits).
Status check_sdpa_int32(const Facts& facts, const CapabilityRow& row, int64_t packed_rows);

// Whether the attention stage writes split partials for the combine: under split (split_kv > 1), and in a
// context-parallel plan at any split (its partials are merged with the other ranks').
bool writes_partials(const Facts& facts, const Decision& decision);
// The partial slots the combine merges: split_kv, times the world size in a context-parallel plan (rank r's
// attention writes slots [r x split_kv, (r + 1) x split_kv)).
int partial_slots(const Facts& facts, const Decision& decision);

// The Derived fields every attention engine fills the same way: the engine, the tile geometry (its shared
// memory too; an engine whose carve-up depends on more than the tile overwrites it) and, when the attention
// writes partials, their partial_slots at the start of the workspace.
Derived sdpa_derived(const Facts& facts, const CapabilityRow& row, const TileGeometry& geometry,
                     const Decision& decision);

// Appends the attention stage -- `spec` launched over (row tiles, H_kv, B x split) CTAs of the geometry's
// threads -- and, when the plan splits, the split-KV combine after it (after any stage the engine launches
// first). NotSupported, naming the row, when a value SdpaParams holds in 32 bits (check_sdpa_int32) or a grid
// dimension exceeds CUDA's limits.
Status add_attention_stages(Derived& derived, const Facts& facts, const CapabilityRow& row, const Decision& decision,
                            const TileGeometry& geometry, KernelSpec spec, int64_t smem_bytes);
// Balanced split-KV (RIME_F_BALANCED, common/attention.cuh for_each_balanced_item): whether the walk's 32-bit
// tile counts hold this geometry.
bool balanced_walk_fits(const Facts& facts, const TileGeometry& geometry);
// A persistent grid (balanced split-KV, sdpa_sm90's dynamic row tiles): ctas_per_sm x SMs CTAs, the GPU full once.
void make_persistent_grid(KernelStage& attention, const Facts& facts, int64_t ctas_per_sm);
// The combine's parameter block at `index` when the attention writes partials, nothing otherwise.
void fill_combine_params(const Facts& facts, const Config& config, const Bindings& bindings, StageParams& out,
                         size_t index);

// Appends `slots` split partials (SPEC section 3: split-major fp32 O, then LSE) to a workspace layout.
void add_split_partials(Derived& derived, const Facts& facts, int slots);
// Appends a region of `bytes` to the workspace, 256-byte aligned.
void add_workspace_region(Derived& derived, const std::string& name, int64_t bytes);

}  // namespace rime::engines
