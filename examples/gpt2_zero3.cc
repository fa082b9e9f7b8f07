// Example: a small GPT-2 trained from scratch with ZeRO-3 over MPI ranks on a real corpus (the
// Debian `fortunes` package): a byte-level BPE tokenizer trained on the corpus, the engine set up
// from a DeepSpeed JSON config, rank-disjoint batches, validation loss before and after, the
// memory ledger, samples, and a Hugging Face checkpoint with the tokenizer.
// Run: mpirun -np 2 ./gpt2_zero3 --deepspeed configs/ds_zero3_demo.json --output_dir out
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpt2_zero3_corpus.h"
#include "gpt2_zero3_flags.h"
#include "zero/comm/communicator.h"
#include "zero/config/ds_config.h"
#include "zero/core/allocator.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/logging.h"
#include "zero/core/memory_ledger.h"
#include "zero/engine/engine.h"
#include "zero/engine/from_config.h"
#include "zero/engine/memory_formula.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/engine_model.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/sampling.h"
#include "zero/gpt2/units.h"
#include "zero/optim/lr_schedules.h"
#include "zero/optim/optimizers.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/lm_dataset.h"
#include "zero/text/sampler.h"
#include "zero/text/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using zero::gpt2::GPT2Config;

// printf on rank 0 only, flushed (ranks' output interleaves otherwise).
class Console {
 public:
  explicit Console(bool enabled) : enabled_(enabled) {}
  [[gnu::format(printf, 2, 3)]] void print(const char* format, ...) const {
    if (!enabled_) return;
    va_list arguments;
    va_start(arguments, format);
    std::vprintf(format, arguments);
    va_end(arguments);
    std::fflush(stdout);
  }

 private:
  bool enabled_;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One rank's micro-batch, (B, T) each: the blocks' tokens and their next-token targets, as
// Hugging Face shifts labels (the last position of a block and rows past the data are -100).
struct MicroBatch {
  std::vector<int> tokens;
  std::vector<int> targets;
};

void fill_micro_batch(const zero::text::BlockDataset& data, std::span<const std::size_t> blocks,
                      std::int64_t B, std::int64_t T, MicroBatch& batch) {
  batch.tokens.assign(static_cast<std::size_t>(B * T), 0);
  batch.targets.assign(static_cast<std::size_t>(B * T), -100);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const std::span<const zero::text::TokenId> block = data.block(blocks[b]);
    for (std::int64_t t = 0; t < T; ++t) {
      batch.tokens[b * T + t] = static_cast<int>(block[t]);
      if (t + 1 < T) batch.targets[b * T + t] = static_cast<int>(block[t + 1]);
    }
  }
}

// Mean next-token loss over the first `max_blocks` validation blocks (0: all). Global batches of
// B × W blocks, rank r taking rows [r·B, (r+1)·B) of each; rows past the data count nothing, so
// the result is exact whatever W. All ranks.
double evaluate(zero::gpt2::EngineModel& model, const zero::text::BlockDataset& data,
                std::int64_t max_blocks) {
  zero::Engine& engine = model.engine();
  const std::int64_t B = model.compute().batch_size(), T = model.compute().seq_len();
  const std::int64_t world = engine.world_size(), rank = engine.rank();
  std::int64_t count = static_cast<std::int64_t>(data.size());
  if (max_blocks > 0) count = std::min(count, max_blocks);
  const std::int64_t global_batch = B * world;
  MicroBatch batch;
  double loss_sum = 0.0, targets = 0.0;
  for (std::int64_t first = 0; first < count; first += global_batch) {
    std::vector<std::size_t> blocks;
    for (std::int64_t b = first + rank * B; b < std::min(first + (rank + 1) * B, count); ++b)
      blocks.push_back(static_cast<std::size_t>(b));
    fill_micro_batch(data, blocks, B, T, batch);
    const double loss = model.eval_loss(batch.tokens, batch.targets);
    loss_sum += loss * static_cast<double>(model.num_counted_targets());
    targets += static_cast<double>(model.num_counted_targets());
  }
  const double mean_targets = engine.average_across_ranks(targets);
  const double mean_sum = engine.average_across_ranks(loss_sum);
  return mean_targets > 0 ? mean_sum / mean_targets : 0.0;
}

int run(const demo::DemoFlags& flags, zero::Communicator& comm) {
  const Clock::time_point run_start = Clock::now();
  const int rank = comm.rank(), world = comm.world_size();
  const Console console(rank == 0);
  const fs::path output_dir = flags.output_dir;
  console.print("gpt2_zero3: %s, %d rank%s (%s)\n", zero::detect_launch().describe().c_str(), world,
                world == 1 ? "" : "s", std::string(comm.backend()).c_str());

  // The corpus: every rank reads it and shuffles its examples identically, so the validation
  // split (the first p% of the shuffled examples, run_clm's train[:p%]) samples every file.
  if (!fs::exists(flags.corpus) && flags.corpus.find(',') == std::string::npos)
    demo::fail_flag("--corpus ", flags.corpus,
                    ": not found (install the Debian package `fortunes`, e.g. scripts/setup.sh, "
                    "or pass a folder or comma-separated text files)");
  const std::vector<fs::path> files = demo::list_corpus_files(flags.corpus);
  std::vector<std::string> examples;
  {
    std::vector<std::string> in_file_order = demo::read_corpus(files);
    for (const std::size_t i : zero::text::shuffled_order(in_file_order.size(), flags.seed, 0))
      examples.push_back(std::move(in_file_order[i]));
  }
  std::size_t corpus_bytes = 0;
  for (const std::string& example : examples) corpus_bytes += example.size();
  const std::size_t validation_end =
      zero::text::percent_boundary(examples.size(), flags.validation_split_percentage);
  console.print(
      "corpus: %zu examples (%.2f MiB) from %zu file%s under %s; the first %zu "
      "(%d%%) validate\n",
      examples.size(), static_cast<double>(corpus_bytes) / (1 << 20), files.size(),
      files.size() == 1 ? "" : "s", files.front().parent_path().c_str(), validation_end,
      flags.validation_split_percentage);

  // The tokenizer: rank 0 learns a byte-level BPE on the training examples and saves it beside
  // the checkpoint; every rank then loads that file, so all encode with the same vocabulary.
  if (rank == 0) {
    const Clock::time_point start = Clock::now();
    fs::create_directories(output_dir);
    zero::text::BpeTrainer trainer({.vocab_size = static_cast<std::size_t>(flags.vocab_size),
                                    .min_frequency = 2,
                                    .add_end_of_text = true});
    for (std::size_t i = validation_end; i < examples.size(); ++i) trainer.add_text(examples[i]);
    const zero::text::BpeVocabulary vocabulary = trainer.train();
    zero::text::save_vocab_and_merges(vocabulary, output_dir);
    console.print(
        "tokenizer: byte-level BPE, %zu tokens (%zu merges) learned in %.1f s -> "
        "%s/{vocab.json,merges.txt}\n",
        vocabulary.tokens.size(), vocabulary.merges.size(), seconds_since(start),
        output_dir.c_str());
  }
  comm.barrier();
  comm.synchronize();
  const zero::text::Tokenizer tokenizer = zero::text::Tokenizer::load(output_dir);
  const std::optional<zero::text::TokenId> end_of_text = tokenizer.end_of_text_id();
  ZERO_CHECK(end_of_text.has_value(), "the trained tokenizer has no <|endoftext|>");

  // Each example is encoded on its own and ended with <|endoftext|>; run_clm's group_texts then
  // concatenates each split and cuts it into blocks of T tokens.
  const std::int64_t T = flags.block_size;
  std::vector<zero::text::TokenId> ids;
  std::vector<std::uint64_t> offsets = {0};
  for (const std::string& example : examples) {
    tokenizer.encode_append(example, ids);
    ids.push_back(*end_of_text);
    offsets.push_back(ids.size());
  }
  const auto stream =
      std::make_shared<const zero::text::TokenStream>(std::move(ids), std::move(offsets));
  const std::size_t block_size = static_cast<std::size_t>(T);
  const zero::text::BlockDataset train =
      zero::text::group_texts(stream, validation_end, examples.size(), block_size, 0);
  const zero::text::BlockDataset validation =
      zero::text::group_texts(stream, 0, validation_end, block_size, 0);
  ZERO_CHECK(train.size() > 0, "the corpus is shorter than one block of ", T, " tokens");
  console.print(
      "data: %zu tokens (%.2f bytes/token); %zu train and %zu validation blocks of "
      "%lld tokens\n",
      stream->tokens().size(),
      static_cast<double>(corpus_bytes) / static_cast<double>(stream->tokens().size()),
      train.size(), validation.size(), static_cast<long long>(T));

  // The model: GPT-2 sized by the flags, vocabulary from the tokenizer, context = one block,
  // no dropout (the run sees well under an epoch).
  GPT2Config config;
  config.vocab_size = static_cast<std::int64_t>(tokenizer.vocab_size());
  config.n_positions = T;
  config.n_layer = flags.n_layer;
  config.n_embd = flags.n_embd;
  config.n_head = flags.n_head;
  config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0;
  config.bos_token_id = config.eos_token_id = *end_of_text;
  if (!flags.config_overrides.empty()) config.apply_overrides(flags.config_overrides);
  config.validate();
  ZERO_CHECK(config.n_positions >= T, "n_positions ", config.n_positions, " < block_size ", T);

  // The engine from the DeepSpeed config, its "auto" values filled from the flags as the
  // Hugging Face Trainer fills them.
  zero::config::TrainerValues trainer_values;
  trainer_values.world_size = world;
  trainer_values.per_device_train_batch_size = flags.per_device_train_batch_size;
  trainer_values.gradient_accumulation_steps = flags.gradient_accumulation_steps;
  trainer_values.learning_rate = flags.learning_rate;
  trainer_values.weight_decay = flags.weight_decay;
  trainer_values.max_grad_norm = flags.max_grad_norm;
  trainer_values.warmup_steps = flags.warmup_steps >= 0 ? flags.warmup_steps : flags.max_steps / 10;
  trainer_values.total_steps = flags.max_steps;
  trainer_values.hidden_size = config.n_embd;
  const zero::config::ConfigResult resolved =
      zero::config::load_config_file(flags.deepspeed, trainer_values);
  const zero::EngineOptionsResult engine_config = zero::engine_options_from_config(
      resolved.config, {.type = zero::config::OptimizerType::kAdamW,
                        .lr = flags.learning_rate,
                        .weight_decay = flags.weight_decay});
  for (const std::string& warning : resolved.warnings)
    console.print("config: %s\n", warning.c_str());
  for (const std::string& warning : engine_config.warnings)
    console.print("config: %s\n", warning.c_str());
  const zero::EngineOptions& options = engine_config.options;
  const std::int64_t B = resolved.config.train_micro_batch_size_per_gpu;
  const std::int64_t accumulation = resolved.config.gradient_accumulation_steps;
  console.print(
      "deepspeed: %s -> ZeRO stage %d, %s lr %g (%s, warmup %lld of %lld steps), "
      "clip %g, batch %lld = %lld per rank x %d rank(s) x %lld accumulation\n",
      flags.deepspeed.c_str(), options.stage,
      std::string(zero::config::name_of(options.optimizer.type)).c_str(), options.optimizer.lr,
      options.scheduler.type == zero::config::SchedulerType::kNone
          ? "constant"
          : std::string(zero::config::name_of(options.scheduler.type)).c_str(),
      static_cast<long long>(options.scheduler.warmup_num_steps),
      static_cast<long long>(options.scheduler.total_num_steps), options.gradient_clipping,
      static_cast<long long>(resolved.config.train_batch_size), static_cast<long long>(B), world,
      static_cast<long long>(accumulation));

  zero::Engine engine(options, comm, zero::optim::make_optimizer(options.optimizer),
                      zero::optim::make_lr_schedule(options.scheduler, options.optimizer.lr));
  // GPT-2's units, initialised by (seed, tensor name, element): the same values whatever the
  // sharding. Activations count in the engine's ledger (reported below).
  zero::gpt2::EngineModel model(engine, config, B, T, flags.seed, engine.allocator());
  const std::vector<zero::gpt2::UnitSpec>& units = model.unit_specs();
  std::vector<std::size_t> unit_num_elements;
  for (const zero::gpt2::UnitSpec& unit : units) unit_num_elements.push_back(unit.num_elements());
  console.print(
      "model: GPT-2, %lld layers, %lld heads, width %lld, vocabulary %lld, context %lld: "
      "%.2fM parameters in %zu units\n",
      static_cast<long long>(config.n_layer), static_cast<long long>(config.n_head),
      static_cast<long long>(config.n_embd), static_cast<long long>(config.vocab_size),
      static_cast<long long>(config.n_positions),
      static_cast<double>(config.num_parameters()) / 1e6, units.size());

  zero::text::DistributedSampler sampler({.num_blocks = train.size(),
                                          .global_batch_size = static_cast<std::size_t>(B * world),
                                          .world_size = world,
                                          .rank = rank,
                                          .seed = flags.seed});
  const std::int64_t micro_steps = flags.max_steps * accumulation;
  console.print("training: %lld steps = %.2f epochs of %llu global batches\n",
                static_cast<long long>(flags.max_steps),
                static_cast<double>(micro_steps) / static_cast<double>(sampler.batches_per_epoch()),
                static_cast<unsigned long long>(sampler.batches_per_epoch()));

  const double validation_start = evaluate(model, validation, flags.max_eval_blocks);
  console.print("step %4d  validation loss %.4f  perplexity %.1f  (uniform: %.4f)\n", 0,
                validation_start, std::exp(validation_start),
                std::log(static_cast<double>(config.vocab_size)));

  // Training: each micro-step takes this rank's slice of the next global batch.
  MicroBatch batch;
  double window_loss = 0.0, first_train_loss = 0.0, last_train_loss = 0.0;
  int window_micro_steps = 0, window_steps = 0;
  Clock::time_point window_start = Clock::now();
  const Clock::time_point train_start = Clock::now();
  for (std::int64_t step = 1; step <= flags.max_steps; ++step) {
    const double lr = engine.lr();
    for (std::int64_t micro = 0; micro < accumulation; ++micro) {
      const std::uint64_t position = sampler.position().step;
      const std::vector<std::size_t> blocks = sampler.next();
      fill_micro_batch(train, blocks, B, T, batch);
      window_loss += model.train_micro_step(
          batch.tokens, batch.targets,
          {.seed = flags.seed,
           .step = position,
           .sample_offset = static_cast<std::int64_t>(position) * B * world + rank * B,
           .training = true});
      ++window_micro_steps;
      engine.step();  // takes the optimizer step after the last micro-step of the cycle
    }
    ++window_steps;
    if (step == 1 || step % flags.logging_steps == 0 || step == flags.max_steps) {
      const double loss = engine.average_across_ranks(window_loss / window_micro_steps);
      const double seconds = seconds_since(window_start);
      const double tokens = static_cast<double>(window_steps * accumulation * B * world * T);
      if (step == 1) first_train_loss = loss;
      last_train_loss = loss;
      console.print(
          "step %4lld  loss %.4f  lr %.2e  grad norm %.3f  %6.0f ms/step  %6.0f tokens/s\n",
          static_cast<long long>(step), loss, lr, engine.global_grad_norm(),
          1e3 * seconds / window_steps, tokens / seconds);
      window_loss = 0.0;
      window_micro_steps = window_steps = 0;
      window_start = Clock::now();
    }
  }
  const double train_seconds = seconds_since(train_start);
  const double validation_end_loss = evaluate(model, validation, flags.max_eval_blocks);
  console.print("step %4lld  validation loss %.4f  perplexity %.1f  (%lld steps in %.1f s)\n",
                static_cast<long long>(flags.max_steps), validation_end_loss,
                std::exp(validation_end_loss), static_cast<long long>(flags.max_steps),
                train_seconds);

  // What ZeRO-3 saved: rank 0's ledger, and the formula's model states at stage 0 for contrast.
  const zero::ModelStateBytes sharded =
      zero::model_state_bytes(options.stage, unit_num_elements, world, options.alignment_elements,
                              options.compute_dtype, 2);
  const zero::ModelStateBytes replicated = zero::model_state_bytes(
      0, unit_num_elements, 1, options.alignment_elements, options.compute_dtype, 2);
  console.print("\n%s", engine.ledger().report("rank 0, after training").c_str());
  console.print("model states per rank: %s at stage %d over %d rank(s); %s unsharded (stage 0)\n\n",
                zero::format_bytes(sharded.total()).c_str(), options.stage, world,
                zero::format_bytes(replicated.total()).c_str());

  // The trained model in one piece on rank 0: every rank gathers each unit in turn (a collective
  // at stage 3), rank 0 copies it into a world-1 GPT2Model to save and sample from.
  zero::MemoryLedger model_ledger;
  zero::HostAllocator model_allocator(model_ledger);
  std::unique_ptr<zero::gpt2::GPT2Model> saved;
  if (rank == 0) saved = std::make_unique<zero::gpt2::GPT2Model>(config, model_allocator);
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    const zero::GatheredUnit gathered = engine.gather(model.units()[u]);
    if (saved)
      std::memcpy(saved->param_data(u), gathered.data(), units[u].num_elements() * sizeof(float));
  }
  if (saved) {
    zero::gpt2::save_hf_checkpoint(*saved, output_dir);
    console.print(
        "saved: %s/{config.json,model.safetensors,vocab.json,merges.txt} (Hugging Face "
        "GPT2LMHeadModel + tokenizer)\n",
        output_dir.c_str());
    std::vector<int> prompt;
    for (const zero::text::TokenId id : tokenizer.encode(flags.prompt))
      prompt.push_back(static_cast<int>(id));
    if (prompt.empty()) prompt.push_back(static_cast<int>(*end_of_text));
    for (int s = 0; s < flags.num_samples; ++s) {
      const std::vector<int> tokens =
          zero::gpt2::generate(*saved, model_allocator, prompt, flags.sample_tokens,
                               {.top_k = flags.top_k,
                                .temperature = static_cast<float>(flags.temperature),
                                .seed = flags.seed + static_cast<std::uint64_t>(s)},
                               static_cast<int>(*end_of_text));
      std::vector<zero::text::TokenId> text_ids;
      for (const int id : tokens)
        if (id != static_cast<int>(*end_of_text))
          text_ids.push_back(static_cast<zero::text::TokenId>(id));
      console.print("sample %d (top-k %d, %zu tokens):\n%s\n%s\n", s + 1, flags.top_k,
                    tokens.size() - prompt.size(), std::string(40, '-').c_str(),
                    tokenizer.decode(text_ids).c_str());
    }
  }

  // With no validation block (a tiny corpus) both evaluations are 0 and only the train loss counts.
  const bool learned = (validation.size() == 0 || validation_end_loss < validation_start) &&
                       last_train_loss < first_train_loss;
  console.print(
      "%s: train loss %.4f -> %.4f, validation loss %.4f -> %.4f in %lld steps, "
      "%.1f s in all\n",
      learned ? "done" : "FAILED (the loss did not fall)", first_train_loss, last_train_loss,
      validation_start, validation_end_loss, static_cast<long long>(flags.max_steps),
      seconds_since(run_start));
  return learned ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  demo::DemoFlags flags;
  try {
    bool help = false;
    flags = demo::parse_flags(argc, argv, help);
    if (help) {
      if (zero::detect_launch().rank == 0) std::printf("%s", demo::usage(argv[0]).c_str());
      return 0;
    }
  } catch (const std::exception& error) {
    if (zero::detect_launch().rank == 0) std::fprintf(stderr, "gpt2_zero3: %s\n", error.what());
    return 2;
  }
  int exit_code = 0;
  std::unique_ptr<zero::Communicator> comm;
  try {
    comm = zero::make_communicator();
    zero::set_log_rank(comm->rank(), comm->world_size());
    exit_code = run(flags, *comm);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[rank %d] gpt2_zero3: %s\n", comm ? comm->rank() : 0, error.what());
    std::fflush(stderr);
    zero::abort_job(1);  // no peer is left waiting in a collective
  }
  comm.reset();
  zero::finalize_communication();
  return exit_code;
}
