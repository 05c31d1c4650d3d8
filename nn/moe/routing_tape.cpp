// nn/moe/routing_tape.cpp — see routing_tape.h.
#include "nn/moe/routing_tape.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "autograd/no_grad.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/safe_file.h"
#include "nn/decoder.h"
#include "nn/moe/moe_layer.h"

namespace moelab {
namespace {

constexpr const char* kOp = "RoutingTape";
constexpr char kMagic[] = "moelab routing tape 1\n";
constexpr int kMagicLength = sizeof(kMagic) - 1;

gzFile as_gz(void* f) { return static_cast<gzFile>(f); }

// The entry header, written and read field by field in little-endian order (x86-64 and the
// CUDA hosts are little-endian; the static_assert keeps it honest).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "routing tapes are written little-endian");
struct EntryHeader {
  std::int32_t layer = 0, k = 0;
  std::int64_t T = 0;
};

}  // namespace

RoutingTape::RoutingTape(std::string path, Phase phase, bool recording)
    : path_(std::move(path)), phase_(phase), recording_(recording) {}

std::shared_ptr<RoutingTape> RoutingTape::record(const std::string& path, Phase phase) {
  std::shared_ptr<RoutingTape> tape(new RoutingTape(path, phase, true));
  tape->temp_path_ = temporary_name(path);
  const int fd = create_new_file(tape->temp_path_);
  MOELAB_CHECK(fd >= 0, kOp, "cannot create '", tape->temp_path_, "' to record '", path, "': ", std::strerror(errno));
  // Level 1: the ids of a step repeat a few values, so the fastest level already shrinks them
  // several times, and recording stays a small part of a step.
  tape->file_ = gzdopen(fd, "wb1");
  if (tape->file_ == nullptr) {
    ::close(fd);
    std::remove(tape->temp_path_.c_str());
    fail(kOp, "cannot start a gzip stream in '", tape->temp_path_, "'");
  }
  MOELAB_CHECK(gzwrite(as_gz(tape->file_), kMagic, kMagicLength) == kMagicLength, kOp, "cannot write '",
               tape->temp_path_, "' (disk full?)");
  return tape;
}

std::shared_ptr<RoutingTape> RoutingTape::replay(const std::string& path, Phase phase) {
  std::shared_ptr<RoutingTape> tape(new RoutingTape(path, phase, false));
  const int fd = open_regular_file(path, O_RDONLY, "replay the routing tape");  // never through a link
  tape->file_ = gzdopen(fd, "rb");
  if (tape->file_ == nullptr) {
    ::close(fd);
    fail(kOp, "cannot read '", path, "' as gzip");
  }
  char magic[kMagicLength] = {};
  const int got = gzread(as_gz(tape->file_), magic, kMagicLength);
  MOELAB_CHECK(got == kMagicLength && std::memcmp(magic, kMagic, kMagicLength) == 0, kOp, "'", path,
               "' is not a moelab routing tape (it does not start with \"moelab routing tape 1\")");
  return tape;
}

RoutingTape::~RoutingTape() {
  if (file_ == nullptr) return;
  gzclose(as_gz(file_));
  if (recording_) std::remove(temp_path_.c_str());  // never finished: no half file is left
}

bool RoutingTape::sees(bool training, bool grad) const {
  return phase_ == Phase::Training ? training && grad : !training;
}

void RoutingTape::append(std::int64_t layer, const Tensor& experts) {
  MOELAB_CHECK(recording_, kOp, "'", path_, "' is being replayed, not recorded");
  MOELAB_CHECK(file_ != nullptr, kOp, "'", path_, "' is finished: nothing more can be recorded");
  MOELAB_CHECK(experts.defined() && experts.dtype() == DType::Int32 && experts.rank() == 2, kOp,
               "records int32 [T, k] experts, got ", experts.defined() ? experts.str() : std::string("undefined"));
  const EntryHeader h{static_cast<std::int32_t>(layer), static_cast<std::int32_t>(experts.size(1)), experts.size(0)};
  const std::vector<std::int32_t> ids = experts.to(Device::cpu()).to_vector<std::int32_t>();
  const auto write = [&](const void* data, std::size_t bytes) {
    MOELAB_CHECK(gzwrite(as_gz(file_), data, static_cast<unsigned>(bytes)) == static_cast<int>(bytes), kOp,
                 "cannot write '", temp_path_, "' (disk full?)");
  };
  write(&h.layer, sizeof h.layer);
  write(&h.k, sizeof h.k);
  write(&h.T, sizeof h.T);
  write(ids.data(), ids.size() * sizeof(std::int32_t));
  ++entries_;
}

Tensor RoutingTape::next(std::int64_t layer, std::int64_t T, std::int64_t k, Device device) {
  MOELAB_CHECK(!recording_, kOp, "'", path_, "' is being recorded, not replayed");
  MOELAB_CHECK(file_ != nullptr, kOp, "'", path_, "' is finished: nothing more can be replayed");
  const std::int64_t entry = entries_ + 1;
  EntryHeader h;
  const auto read = [&](void* data, std::size_t bytes, const char* what) {
    const int got = gzread(as_gz(file_), data, static_cast<unsigned>(bytes));
    if (got == static_cast<int>(bytes)) return true;
    int code = 0;
    const char* reason = gzerror(as_gz(file_), &code);
    MOELAB_CHECK(code == Z_OK || code == Z_BUF_ERROR, kOp, "'", path_, "' is damaged at entry ", entry, ": ", reason);
    MOELAB_CHECK(got == 0 && std::strcmp(what, "layer") == 0, kOp, "'", path_, "' ends inside entry ", entry,
                 " (its ", what, "): the recording was cut short");
    return false;
  };
  MOELAB_CHECK(read(&h.layer, sizeof h.layer, "layer"), kOp, "'", path_, "' holds ", entries_,
               " entries and this run asks for more (layer ", layer, " of a further forward): the recording was "
               "shorter than this run (fewer steps or forwards)");
  read(&h.k, sizeof h.k, "k");
  read(&h.T, sizeof h.T, "T");
  MOELAB_CHECK(h.layer == layer && h.k == k && h.T == T, kOp, "'", path_, "' entry ", entry, " is layer ", h.layer,
               "'s experts of ", h.T, " tokens x ", h.k, ", but this forward's layer ", layer, " routes ", T,
               " tokens x ", k, ": the replay must make the recording's forwards on the same batches (same task, "
               "data seed, batch size and model layers)");
  MOELAB_CHECK(T >= 1 && k >= 1 && T <= (std::int64_t{1} << 40) / k, kOp, "'", path_, "' entry ", entry,
               " has an impossible size ", T, " x ", k);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(T * k));
  read(ids.data(), ids.size() * sizeof(std::int32_t), "expert ids");
  ++entries_;
  return from_vector(ids, {T, k}, device);
}

void RoutingTape::finish() {
  if (file_ == nullptr) return;
  const int status = gzclose(as_gz(file_));
  file_ = nullptr;
  if (!recording_) return;
  if (status != Z_OK) {
    std::remove(temp_path_.c_str());
    fail(kOp, "cannot finish '", temp_path_, "' (disk full?): gzclose returned ", status);
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(temp_path_.c_str());
    fail(kOp, "cannot rename '", temp_path_, "' to '", path_, "': ", std::strerror(err));
  }
}

void attach_routing_tape(Decoder& model, const std::shared_ptr<RoutingTape>& tape) {
  std::int64_t moe_layers = 0;
  for (std::int64_t i = 0; i < model.config().layers; ++i) {
    auto* moe = dynamic_cast<MoELayer*>(&model.layer(i).ffn());
    if (moe == nullptr) continue;
    if (tape && !tape->recording())
      MOELAB_CHECK(moe->router().can_replay(), kOp, "block ", i, "'s router (", moe->router().scheme(),
                   ") cannot replay recorded experts: ", moe->router().why_no_replay());
    moe->set_routing_tape(tape, moe_layers++);
  }
  MOELAB_CHECK(moe_layers > 0, kOp, "the model has no MoE layer to record or replay");
}

}  // namespace moelab
