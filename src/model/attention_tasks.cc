#include "model/attention_tasks.h"

#include <algorithm>

#include "kernels/thread_pool.h"
#include "kvpolicy/sparse_selection.h"

namespace kvforge::model {
namespace {

// Sparse decode: narrows a one-query attention of KV head `kvh` to the blocks the plan selects,
// by pointing both views at a gathered table of those blocks (logical order kept, the query's
// block last) so the kernels run unchanged over fewer slots. Views whose slots must stay where
// they are (a KIVI residual window, a dead range) and caches without summaries stay dense.
void GatherSparseBlocks(const kvpolicy::SparseDecode& plan, const kvpolicy::BlockKeySummaries& sums,
                        int32_t kvh, std::vector<int32_t>* blocks, std::vector<int32_t>* positions,
                        kernels::AttentionArgs* a) {
  if (sums.base == nullptr || a->k.recent != nullptr || a->v.recent != nullptr ||
      a->dead_begin < a->dead_end || a->k.block_tokens != a->v.block_tokens)
    return;
  const int32_t bt = a->k.block_tokens;
  const int64_t n_kv = a->slot0 + 1;
  const int64_t n_logical = (n_kv + bt - 1) / bt;
  const int64_t last_tokens = n_kv - (n_logical - 1) * bt;
  const int32_t group = a->n_head / a->n_kv_head;
  const float* q = a->q + static_cast<int64_t>(kvh) * group * a->head_dim;
  const std::vector<int32_t> pick =
      kvpolicy::SelectDecodeBlocks(plan, q, group, a->head_dim, a->scale, sums, kvh,
                                   a->k.block_table, n_logical, last_tokens, bt);
  // (A pick of every block still goes through the gathered table: it then computes exactly what
  // dense attention does, which the tests rely on.)
  blocks->clear();
  for (int32_t b : pick) blocks->push_back(a->k.block_table[b]);
  const int64_t n_read = static_cast<int64_t>(pick.size() - 1) * bt + last_tokens;
  if (a->k.rope != nullptr) {  // kvquant3 keys rotate to their slot's position when read
    positions->clear();
    for (int32_t b : pick)
      for (int64_t j = 0; j < (b + 1 == n_logical ? last_tokens : bt); ++j)
        positions->push_back(
            static_cast<int32_t>(a->k.PositionOf(static_cast<int64_t>(b) * bt + j)));
    a->k.positions = positions->data();
  }
  a->k.block_table = a->v.block_table = blocks->data();
  a->slot0 = n_read - 1;
}

}  // namespace

// How many parts the query heads of one KV head are split into: MQA and MLA (one KV head) decode
// would otherwise be one task per sequence, leaving cores idle at small batches. Sparse decode
// selects blocks from the whole group's queries, so its sequences are not split.
int32_t QueryHeadSplits(const Batch& batch, const AttentionJob& job,
                        const std::vector<size_t>& seqs, int64_t q_chunk, int threads) {
  if (job.n_kv_head != 1 || job.n_head < 2) return 1;
  int64_t tasks = 0;
  for (size_t si : seqs) {
    if (batch.seqs[si].sparse != nullptr) return 1;
    tasks += (batch.seqs[si].n_tokens + q_chunk - 1) / q_chunk;
  }
  const int64_t want = 2 * static_cast<int64_t>(threads);  // a little slack for uneven tasks
  if (tasks >= want) return 1;
  return static_cast<int32_t>(std::min<int64_t>(job.n_head, (want + tasks - 1) / tasks));
}

namespace {

// The arguments of one sequence's attention over every head (the task loop below narrows them).
kernels::AttentionArgs SequenceArgs(const SeqChunk& s, const AttentionJob& job,
                                    const kvstore::KvAccess& kv, size_t si, bool own_views) {
  kernels::AttentionArgs a;
  a.q = job.q + s.token_begin * job.q_stride;
  a.q_stride = job.q_stride;
  a.out = job.out + s.token_begin * job.out_stride;
  a.out_stride = job.out_stride;
  a.n_q = s.n_tokens;
  a.slot0 = s.first_slot();
  a.n_head = job.n_head;
  a.n_kv_head = job.n_kv_head;
  a.head_dim = job.head_dim;
  a.v_dim = job.v_dim;
  a.scale = job.scale;
  a.k = own_views ? job.k_views[si] : kv.KeyView(job.layer, s.kv_seq);
  a.v = own_views ? job.v_views[si] : kv.ValueView(job.layer, s.kv_seq);
  return a;
}

// Whether sequence s's attention `a` (SequenceArgs, the cache's own views) reads whole rows
// (attention_decode_part): one query over f32 / f16 / q8_0 rows, nothing observed, not sparse,
// no dead slot in any head.
bool ReadsWholeRows(const SeqChunk& s, const AttentionJob& job, const kvstore::KvAccess& kv,
                    const kernels::AttentionArgs& a) {
  if (s.n_tokens != 1 || (s.observed != nullptr && s.observe_from < 1)) return false;
  if (s.sparse != nullptr && job.layer >= s.sparse->dense_layers) return false;
  for (int32_t h = 0; h < job.n_kv_head; ++h) {
    const kvstore::SlotRange dead = kv.DeadSlots(job.layer, s.kv_seq, h);
    if (dead.begin < dead.end) return false;
  }
  return kernels::DecodePartApplies(a);
}

// Decode sequences read row by row (args: one per sequence, ReadsWholeRows), each split into
// parts of at least kMinPartSlots slots (block aligned) when there are fewer sequences than
// threads, so a lone long sequence still streams on every core; the parts' partial softmax sums
// are merged into each sequence's output afterwards.
void RunDecodeParts(const AttentionJob& job, const std::vector<kernels::AttentionArgs>& args,
                    Workspace& ws, kernels::ThreadPool& pool) {
  if (args.empty()) return;
  constexpr int64_t kMinPartSlots = 256;
  struct Part {
    size_t seq;  // index into args
    int64_t begin, end;
  };
  std::vector<Part> parts;
  std::vector<size_t> first_part;  // per entry of args, its first part; then parts.size()
  const auto n_seqs = static_cast<int64_t>(args.size());
  const int64_t threads = pool.num_threads();
  const int64_t per_seq = n_seqs >= threads ? 1 : (2 * threads + n_seqs - 1) / n_seqs;
  for (size_t i = 0; i < args.size(); ++i) {
    const int64_t n_kv = args[i].slot0 + 1;
    const int64_t bt = std::max<int64_t>(1, args[i].k.block_tokens);
    const int64_t n = std::max<int64_t>(1, std::min(per_seq, n_kv / kMinPartSlots));
    first_part.push_back(parts.size());
    int64_t begin = 0;
    for (int64_t c = 1; c <= n; ++c) {
      const int64_t end = c == n ? n_kv : (n_kv * c / n + bt - 1) / bt * bt;
      if (end > begin) parts.push_back({i, begin, end});
      begin = std::max(begin, end);
    }
  }
  first_part.push_back(parts.size());
  const int64_t nh = job.n_head, vd = job.v_dim > 0 ? job.v_dim : job.head_dim;
  const int64_t np = static_cast<int64_t>(parts.size());
  // [parts][n_head][v_dim] unnormalized outputs, then [parts][n_head] maxima and [parts][n_head]
  // sums.
  ws.decode_parts.resize(static_cast<size_t>(np * (nh * vd + 2 * nh)));
  float* o = ws.decode_parts.data();
  float* m = o + np * nh * vd;
  float* l = m + np * nh;
  const kernels::KernelTable& kt = kernels::Active();
  pool.ParallelForDynamic(np, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t pi = b; pi < e; ++pi) {
      const Part& part = parts[static_cast<size_t>(pi)];
      kt.attention_decode_part(args[part.seq], part.begin, part.end, o + pi * nh * vd, m + pi * nh,
                               l + pi * nh);
    }
  });
  for (size_t i = 0; i < args.size(); ++i) {
    const auto p0 = static_cast<int64_t>(first_part[i]);
    const int64_t n = static_cast<int64_t>(first_part[i + 1]) - p0;
    kernels::MergeDecodeParts(n, job.n_head, static_cast<int32_t>(vd), o + p0 * nh * vd,
                              m + p0 * nh, l + p0 * nh, args[i].out);
  }
}

}  // namespace

// Tasks are (sequence, kv head, query chunk, query heads) so prefill and MQA still split. A task
// that observes for a policy gets its own row of ws.observed (no sharing between threads), summed
// into the sequence's row after the parallel loop (the weights are sums over query heads, so a
// split group sums to the same row).
void RunAttentionTasks(const Batch& batch, const AttentionJob& job, kvstore::KvAccess& kv,
                       Workspace& ws, kernels::ThreadPool& pool) {
  const kernels::KernelTable& kt = kernels::Active();
  const int32_t l = job.layer;
  const bool own_views = !job.k_views.empty();
  struct Task {
    size_t seq;
    int32_t kvh;
    int32_t h0, nh;  // query heads [h0, h0 + nh) of the group (all of it unless split)
    int64_t q0, nq;
    int64_t observed_row;  // -1: no observer
  };
  std::vector<Task> tasks;
  constexpr int64_t kQChunk = 16;
  // Long prefill chunks: 64 queries per task, so the prefill kernel's f32 panels of each KV
  // head's rows are shared by 4x more queries (still 8 tasks per head of a 512-token chunk).
  constexpr int64_t kLongQChunk = 64;
  int64_t n_observing = 0, max_kv = 0;
  std::vector<size_t> all = job.seqs;
  if (all.empty())
    for (size_t si = 0; si < batch.seqs.size(); ++si) all.push_back(si);
  std::vector<size_t> seqs;                      // the per-head tasks below
  std::vector<kernels::AttentionArgs> row_args;  // the whole-row decode parts, one per sequence
  for (size_t si : all) {
    if (!own_views) {
      kernels::AttentionArgs a = SequenceArgs(batch.seqs[si], job, kv, si, /*own_views=*/false);
      if (ReadsWholeRows(batch.seqs[si], job, kv, a)) {
        row_args.push_back(a);
        continue;
      }
    }
    seqs.push_back(si);
  }
  RunDecodeParts(job, row_args, ws, pool);
  if (seqs.empty()) return;
  const int32_t group = job.n_head / job.n_kv_head;
  const int32_t splits = QueryHeadSplits(batch, job, seqs, kQChunk, pool.num_threads());
  for (size_t si : seqs) {
    const auto& s = batch.seqs[si];
    max_kv = std::max(max_kv, s.first_slot() + s.n_tokens);
    const int64_t q_chunk = s.n_tokens >= 4 * kLongQChunk ? kLongQChunk : kQChunk;
    for (int32_t h = 0; h < job.n_kv_head; ++h)
      for (int64_t q0 = 0; q0 < s.n_tokens; q0 += q_chunk)
        for (int32_t part = 0; part < splits; ++part) {
          const int32_t h0 = group * part / splits, h1 = group * (part + 1) / splits;
          if (h1 == h0) continue;
          const int64_t nq = std::min(q_chunk, s.n_tokens - q0);
          const bool observes = s.observed != nullptr && q0 + nq > s.observe_from;
          tasks.push_back({si, h, h0, h1 - h0, q0, nq, observes ? n_observing++ : -1});
        }
  }
  if (n_observing > 0) ws.observed.assign(static_cast<size_t>(n_observing * max_kv), 0.0f);
  pool.ParallelFor(static_cast<int64_t>(tasks.size()), [&](int64_t b, int64_t e, int th) {
    for (int64_t ti = b; ti < e; ++ti) {
      const Task& task = tasks[static_cast<size_t>(ti)];
      const auto& s = batch.seqs[task.seq];
      kernels::AttentionArgs a = SequenceArgs(s, job, kv, task.seq, own_views);
      a.q += task.q0 * job.q_stride;
      a.out += task.q0 * job.out_stride;
      a.n_q = task.nq;
      a.slot0 += task.q0;
      // Decompressed views (MLA's naive path) have one head per query head over the cache's one.
      const kvstore::SlotRange dead = kv.DeadSlots(l, s.kv_seq, own_views ? 0 : task.kvh);
      a.dead_begin = dead.begin;
      a.dead_end = dead.end;
      if (task.observed_row >= 0) {
        a.slot_scores = ws.observed.data() + task.observed_row * max_kv;
        a.observe_from = s.observe_from - task.q0;
      }
      if (task.nh != group) {  // part of one KV head's group (n_kv_head is 1): heads h0.. only
        a.q += static_cast<int64_t>(task.h0) * job.head_dim;
        a.out += static_cast<int64_t>(task.h0) * (job.v_dim > 0 ? job.v_dim : job.head_dim);
        a.n_head = task.nh;
      }
      // One task, one thread: its gathered block table / positions live until the call ends.
      thread_local std::vector<int32_t> gathered_blocks, gathered_positions;
      if (!own_views && s.sparse != nullptr && s.n_tokens == 1 && l >= s.sparse->dense_layers)
        GatherSparseBlocks(*s.sparse, kv.KeySummaries(l), task.kvh, &gathered_blocks,
                           &gathered_positions, &a);
      kt.attention(a, task.kvh, task.kvh + 1, ws.scratch[static_cast<size_t>(th)].data());
    }
  });
  for (const Task& task : tasks) {
    if (task.observed_row < 0) continue;
    const auto& s = batch.seqs[task.seq];
    const float* src = ws.observed.data() + task.observed_row * max_kv;
    const int64_t lane = l * s.observed_lanes + (s.observed_lanes > 1 ? task.kvh : 0);
    float* dst = s.observed + lane * s.observed_stride;
    for (int64_t p = 0; p < s.first_slot() + s.n_tokens; ++p) dst[p] += src[p];
  }
}

}  // namespace kvforge::model
