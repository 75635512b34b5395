//===- ProgramRunner.cpp - interprets one rank's program ------------------===//

#include "ProgramRunner.h"

#include "ppc/Runtime/CpuTime.h"
#include "ppc/Runtime/PlanIO.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <stdexcept>
#include <system_error>

namespace ppc::runtime {

using namespace ppc::planfile;
using Clock = std::chrono::steady_clock;

const char *phaseName(int phase) {
  static const char *names[kNumPhases] = {"other",    "forward",   "loss",
                                          "backward", "grad_sync", "update"};
  return phase >= 0 && phase < kNumPhases ? names[phase] : "other";
}

ProgramRunner::ProgramRunner(const Plan &plan, const DataSource &data,
                             Communicator &comm, Backend &backend)
    : plan(plan), program(plan.programs(comm.rank())), data(data), comm(comm),
      backend(backend) {}

DType ProgramRunner::dtypeOf(int32_t tensor) const {
  DType dtype = DType::F32;
  if (tensor >= 0)
    storageDType(plan.tensors(tensor).dtype(), dtype); // checked by prepare
  return dtype;
}

DeviceBuffer *ProgramRunner::stagingBuffer(DType dtype, int64_t n) {
  if (!staging_ || staging_->dtype() != dtype || staging_->size() < n)
    staging_ = backend.allocate(dtype, n);
  return staging_.get();
}

std::vector<float> ProgramRunner::hostValues(const DeviceBuffer &buffer,
                                             int64_t n) const {
  std::vector<float> values(n);
  backend.read(buffer, 0, n, values.data());
  return values;
}

absl::Status ProgramRunner::prepare() {
  for (const Op &op : plan.ops()) {
    descs.push_back(describeOp(plan, op));
    kinked_.push_back(kinkedDerivative(descs.back()) != nullptr);
  }
  for (const Tensor &t : plan.tensors()) {
    DType dtype;
    if (!storageDType(t.dtype(), dtype))
      return absl::InvalidArgumentError(
          "tensor '" + t.name() + "' has element type '" + t.dtype() +
          "', which the " + backend.name() +
          " backend does not store (f32, f64, bf16, f16 or an integer "
          "type)");
  }

  const int n = program.instructions_size();
  contextOp.assign(n, -1);
  int32_t next = -1;
  for (int i = n - 1; i >= 0; --i) {
    const Instruction &instr = program.instructions(i);
    if (instr.has_kernel())
      next = instr.kernel().op();
    else if (instr.has_kernel_backward())
      next = instr.kernel_backward().op();
    contextOp[i] = next;
  }
  int32_t last = -1;
  for (int i = 0; i < n; ++i) {
    if (contextOp[i] < 0)
      contextOp[i] = last;
    const Instruction &instr = program.instructions(i);
    if (instr.has_kernel())
      last = instr.kernel().op();
    else if (instr.has_kernel_backward())
      last = instr.kernel_backward().op();
  }

  phaseAt_.assign(n, 0);
  for (int i = 0, phase = 0; i < n; ++i) {
    const Instruction &instr = program.instructions(i);
    if (instr.has_phase() && instr.phase().phase() >= 0 &&
        instr.phase().phase() < kNumPhases)
      phase = instr.phase().phase();
    phaseAt_[i] = phase;
  }

  const int maxTag = comm.maxTag();
  for (int i = 0; i < n; ++i) {
    const Instruction &instr = program.instructions(i);
    int tag = instr.has_send()   ? instr.send().tag()
              : instr.has_recv() ? instr.recv().tag()
                                 : 0;
    if (tag < 0 || tag > maxTag)
      return absl::InvalidArgumentError(
          "instruction " + std::to_string(i) + ": tag " + std::to_string(tag) +
          " is outside MPI's range [0, " + std::to_string(maxTag) + "]");
  }

  // Every rank lists every group of the plan in the same order.
  std::set<std::vector<int>> groups;
  for (const Program &p : plan.programs())
    for (const Instruction &instr : p.instructions())
      if (instr.has_collective())
        groups.insert(std::vector<int>(instr.collective().group().begin(),
                                       instr.collective().group().end()));
  return comm.createGroups({groups.begin(), groups.end()});
}

std::string ProgramRunner::tensorName(int32_t tensor) const {
  return tensor < 0 ? "scratch" : plan.tensors(tensor).name();
}

std::string ProgramRunner::context() const {
  std::string s = "instruction " + std::to_string(index_) + " of step " +
                  std::to_string(step_) + ", phase " + phaseName(phase_);
  if (index_ < static_cast<int>(contextOp.size()) && contextOp[index_] >= 0)
    s += ", op " + plan.ops(contextOp[index_]).name();
  return s;
}

static bool isCommunication(const Instruction &instr) {
  return instr.has_send() || instr.has_recv() || instr.has_collective();
}

namespace {
#include "ppc/Runtime/PlanBuffers.inc"
} // namespace

/// Calls fn(id) for every buffer `instr` reads or writes (-1: none).
template <typename Fn>
static void forEachBuffer(const Instruction &instr, Fn &&fn) {
  if (forEachDerivedBuffer(instr, fn))
    return;
  auto all = [&](const google::protobuf::RepeatedField<int32_t> &ids) {
    for (int32_t id : ids)
      fn(id);
  };
  switch (instr.kind_case()) {
  case Instruction::kAlloc:
    return fn(instr.alloc().buffer().id());
  case Instruction::kKernelBackward: {
    const Instruction::KernelBackward &k = instr.kernel_backward();
    all(k.inputs());
    all(k.outputs());
    all(k.output_grads());
    all(k.input_grads());
    return all(k.scratch());
  }
  case Instruction::kCollective:
    fn(instr.collective().buffer());
    return fn(instr.collective().result());
  default:
    return;
  }
}

void ProgramRunner::planOverlap() {
  overlapPlanned_ = true;
  const int n = program.instructions_size();
  startsAfter_.assign(n, {});
  startedEarly_.assign(n, false);
  // The memory each instruction touches, by the id of the buffer that
  // allocated it: a view touches the memory of the buffer it views.
  std::unordered_map<int32_t, int32_t> memoryOf;
  std::vector<std::vector<int32_t>> touches(n);
  for (int i = 0; i < n; ++i) {
    const Instruction &instr = program.instructions(i);
    if (instr.has_alloc()) {
      const int32_t id = instr.alloc().buffer().id();
      memoryOf[id] =
          instr.alloc().has_view() ? memoryOf[instr.alloc().view()] : id;
    }
    forEachBuffer(instr, [&](int32_t id) {
      if (id < 0) // no buffer (a collective's result, a gradient not kept)
        return;
      auto it = memoryOf.find(id);
      touches[i].push_back(it == memoryOf.end() ? id : it->second);
    });
  }
  // Every collective (of every kind and phase) starts after the last
  // instruction before it that touches one of its buffers (the gradient's
  // last kernel, the update of a weight piece), where work lies between the
  // two to overlap.
  std::vector<int> lastToucher(n, -1);
  std::map<std::vector<int>, std::vector<int>> collectivesOf; // by group
  for (int i = 0; i < n; ++i) {
    const Instruction &instr = program.instructions(i);
    if (!instr.has_collective() || instr.collective().group_size() < 2)
      continue;
    const auto &g = instr.collective().group();
    collectivesOf[std::vector<int>(g.begin(), g.end())].push_back(i);
    int last = -1;
    for (int32_t buffer : touches[i])
      for (int j = i - 1; j > last; --j)
        if (std::find(touches[j].begin(), touches[j].end(), buffer) !=
            touches[j].end()) {
          last = j;
          break;
        }
    bool work = false;
    for (int j = last + 1; last >= 0 && j < i && !work; ++j) {
      const Instruction &between = program.instructions(j);
      work = between.has_kernel() || between.has_kernel_backward() ||
             between.has_update() || between.has_collective() ||
             between.has_send() || between.has_recv() || between.has_copy();
    }
    if (work)
      lastToucher[i] = last;
  }
  // The members of a group must all start a collective early or all run it
  // in place (they run on different communicators): each group's members
  // agree, the groups in one order on every rank so that no two wait on
  // each other.
  for (const auto &[group, indices] : collectivesOf) {
    std::vector<int64_t> mine;
    for (int i : indices)
      mine.push_back(lastToucher[i] >= 0);
    std::vector<int64_t> all = comm.allGatherInts(mine, group, [&] {
      return "agreeing which collectives of group " + groupString(group) +
             " start early";
    });
    for (size_t k = 0; k < indices.size(); ++k)
      for (size_t m = 0; m < group.size(); ++m)
        if (all.size() != mine.size() * group.size() ||
            all[m * mine.size() + k] == 0)
          lastToucher[indices[k]] = -1;
  }
  // Started in program order: each member starts a group's collectives in
  // the order of the one global order the programs share.
  int floor = -1;
  for (int i = 0; i < n; ++i) {
    if (lastToucher[i] < 0)
      continue;
    floor = std::max(floor, lastToucher[i]);
    startsAfter_[floor].push_back(i);
    startedEarly_[i] = true;
  }
}

absl::Status ProgramRunner::runStep(int64_t step, bool trace,
                                    bool keepGradients, StepProfile &profile) {
  step_ = step;
  phase_ = 0;
  keepGradients_ = keepGradients;
  gradientsChecked_ = false;
  skipUpdates_ = false;
  profile = StepProfile();
  trace_.clear();
  if (keepGradients) {
    keptGrads_.clear();
    kinkInputs_.clear();
    updated_.clear();
  }
  live.clear();
  pendingOutputs_.clear();
  pendingUpdates_.clear();
  pendingUpdateTensors_.clear();
  // The first step runs every collective in place; later ones overlap.
  const bool overlapping = overlap_ && overlapPlanned_;
  const Clock::time_point start = Clock::now();
  auto seconds = [](Clock::duration d) {
    return std::chrono::duration<double>(d).count();
  };
  // A kernel's profile time runs from the end of the previous kernel or
  // communication to its own end (thread CPU time with one thread, else
  // wall time): its own work and the executor's around it (allocations,
  // fills, loads, local copies, frees, the loop itself), which the
  // simulator's kernel time stands for. Communication is priced apart;
  // the executor's work between a kernel and a communication goes to that
  // kernel, as it delays what the communication sends.
  auto clockNow = [&](Clock::time_point wall) {
    return cpuTimeKernels_ ? threadCpuSeconds() : seconds(wall - start);
  };
  double lastMark = clockNow(start);
  KernelTiming *lastTiming = nullptr;
  // A backend that queues its work (cuda) is timed by its device's clock,
  // without waiting: a kernel's time runs from the device event after the
  // previous kernel or communication to the one after it, so the device
  // work between (copies, fills) is the kernel's, and so is any time the
  // device waited for the host to issue it.
  const bool deviceTimed = timeKernels_ && backend.queuesWork();
  deviceTimed_.clear();
  std::shared_ptr<Event> lastEvent =
      deviceTimed ? std::shared_ptr<Event>(backend.recordTimed()) : nullptr;
  // Charges `timing` with the time since the last mark, up to `wall`.
  auto charge = [&](KernelTiming &timing, Clock::time_point wall) {
    const double now = clockNow(wall);
    timing.seconds += now - lastMark;
    lastMark = now;
  };
  for (index_ = 0; index_ < program.instructions_size(); ++index_) {
    const Instruction &instr = program.instructions(index_);
    // Timing kernels on a backend that queues its work (cuda) measures the
    // work itself: wait for what came before and for the instruction's own.
    if (timeKernels_ && !deviceTimed)
      backend.synchronize();
    const Clock::time_point t0 = Clock::now();
    if (timeKernels_ && !deviceTimed && lastTiming && isCommunication(instr))
      charge(*lastTiming, t0);
    absl::Status err;
    const bool startedEarly = overlapping && startedEarly_[index_];
    double startedAt = 0;
    if (startedEarly)
      startedAt = started_.count(index_) ? started_[index_].startedAt : 0;
    // The memory check before the first step leaves room for kernels'
    // temporaries, not for other processes' use: fail cleanly anyway.
    try {
      err = startedEarly ? waitCollective(index_) : execute(instr);
      if (overlapping && err.ok())
        for (int next : startsAfter_[index_])
          if (!(err = startCollective(next, seconds(Clock::now() - start)))
                   .ok())
            break;
      if (overlapping && err.ok() && !started_.empty())
        comm.progress();
    } catch (const std::bad_alloc &) {
      err = absl::ResourceExhaustedError("out of memory");
    } catch (const std::length_error &) {
      err = absl::ResourceExhaustedError(
          "out of memory (a size beyond what a vector can hold)");
    }
    if (!err.ok())
      return appendToMessage(err, " (" + context() + ")");
    if (timeKernels_ && !deviceTimed)
      backend.synchronize();
    if (deviceTimed && (isCommunication(instr) || instr.has_kernel() ||
                        instr.has_kernel_backward())) {
      std::shared_ptr<Event> now(backend.recordTimed());
      if (!isCommunication(instr))
        deviceTimed_.push_back({kernelKey_,
                                instr.has_kernel()
                                    ? instr.kernel().stage()
                                    : instr.kernel_backward().stage(),
                                lastEvent, now});
      lastEvent = std::move(now);
    }
    const Clock::time_point t1 = Clock::now();
    // An early all-reduce shows on the communication track from its start.
    if (startedEarly && trace)
      trace_.push_back({traceName(instr) + " (started early)", 1, startedAt,
                        seconds(t1 - start) - startedAt, phase_, index_});
    profile.phaseSeconds[phase_] += seconds(t1 - t0);
    if (timeKernels_ && !deviceTimed && isCommunication(instr))
      lastMark = clockNow(t1);
    if (timeKernels_ && !deviceTimed &&
        (instr.has_kernel() || instr.has_kernel_backward())) {
      KernelTiming &timing = timings_[kernelKey_];
      charge(timing, t1);
      lastTiming = &timing;
      // Stages of one op add up to one kernel of the profile.
      int32_t stage = instr.has_kernel() ? instr.kernel().stage()
                                         : instr.kernel_backward().stage();
      timing.runs += stage == 0 ? 1 : 0;
    }
    if (isCommunication(instr))
      profile.commSeconds += seconds(t1 - t0);
    if (trace && !startedEarly && !instr.has_alloc() && !instr.has_free() &&
        !instr.has_phase() && !instr.has_output())
      trace_.push_back({traceName(instr), isCommunication(instr) ? 1 : 0,
                        seconds(t0 - start), seconds(t1 - t0), phase_, index_});
  }
  // Every rank takes part in the check once per step.
  if (lossScale_.active() && !gradientsChecked_)
    checkGradients();
  const Clock::time_point t0 = Clock::now();
  // A step ends when its work is done, not when it is queued (cuda), and
  // with the errors its kernels found in device values.
  backend.synchronize();
  for (const DeviceTimedKernel &k : deviceTimed_) {
    KernelTiming &timing = timings_[k.key];
    if (k.from && k.to)
      timing.seconds += k.to->secondsSince(*k.from);
    // Stages of one op add up to one kernel of the profile.
    timing.runs += k.stage == 0 ? 1 : 0;
  }
  deviceTimed_.clear();
  outputs_.clear();
  for (const auto &[tensor, size] : pendingOutputs_)
    outputs_[tensor] = hostValues(*outputCopies_[tensor], size);
  pendingOutputs_.clear();
  int64_t failedAt = -1;
  if (absl::Status err = backend.deferredError(failedAt); !err.ok()) {
    if (failedAt < 0 || failedAt >= program.instructions_size() ||
        !(program.instructions(failedAt).has_kernel() ||
          program.instructions(failedAt).has_kernel_backward()))
      return appendToMessage(err,
                             " (end of step " + std::to_string(step) + ")");
    index_ = static_cast<int>(failedAt);
    phase_ = phaseAt_[index_];
    return appendToMessage(kernelError(index_, err), " (" + context() + ")");
  }
  if (absl::Status err =
          comm.completeSends("end of step " + std::to_string(step));
      !err.ok())
    return appendToMessage(err, " (end of step " + std::to_string(step) + ")");
  const Clock::time_point t1 = Clock::now();
  profile.phaseSeconds[phase_] += seconds(t1 - t0);
  profile.commSeconds += seconds(t1 - t0);
  if (trace && t1 - t0 > std::chrono::microseconds(1))
    trace_.push_back({"send completion", 1, seconds(t0 - start),
                      seconds(t1 - t0), phase_, -1});
  live.clear();
  if (plan.training())
    lossScale_.afterStep(skipUpdates_);
  profile.seconds = seconds(t1 - start);
  if (overlap_ && !overlapPlanned_)
    planOverlap();
  return absl::OkStatus();
}

absl::Status ProgramRunner::execute(const Instruction &instr) {
  switch (instr.kind_case()) {
  case Instruction::kPhase:
    phase_ = instr.phase().phase();
    if (phase_ < 0 || phase_ >= kNumPhases)
      phase_ = 0;
    if (phase_ == Instruction::UPDATE && lossScale_.active())
      checkGradients();
    return absl::OkStatus();
  case Instruction::kAlloc:
    return alloc(instr.alloc());
  case Instruction::kFree:
    live.erase(instr.free().buffer());
    return absl::OkStatus();
  case Instruction::kLoad: {
    Buffer *b;
    if (absl::Status err = lookup(instr.load().buffer(), b); !err.ok())
      return err;
    return load(*b, instr.load().buffer());
  }
  case Instruction::kFill: {
    Buffer *b;
    if (absl::Status err = lookup(instr.fill().buffer(), b); !err.ok())
      return err;
    // The loss gradient's seed carries the loss scale.
    const bool seed =
        b->grad && b->tensor == plan.loss_tensor() && instr.fill().value() != 0;
    backend.fill(*b->storage,
                 instr.fill().value() * (seed ? lossScale_.scale : 1.0));
    return absl::OkStatus();
  }
  case Instruction::kCopy:
    return copy(instr.copy());
  case Instruction::kSend:
    return send(instr.send());
  case Instruction::kRecv:
    return recv(instr.recv());
  case Instruction::kKernel:
    return kernel(instr.kernel());
  case Instruction::kKernelBackward:
    return kernelBackward(instr.kernel_backward());
  case Instruction::kCollective:
    return collective(instr.collective());
  case Instruction::kUpdate:
    return update(instr.update());
  case Instruction::kOutput:
    return output(instr.output());
  default:
    return absl::InvalidArgumentError("unknown instruction kind " +
                                      std::to_string(instr.kind_case()));
  }
}

absl::Status ProgramRunner::lookup(int32_t id, Buffer *&buffer) {
  auto it = live.find(id);
  if (it == live.end())
    return absl::InvalidArgumentError("buffer " + std::to_string(id) +
                                      " is not allocated");
  buffer = &it->second;
  return absl::OkStatus();
}

absl::Status ProgramRunner::alloc(const Instruction::Alloc &a) {
  const planfile::Buffer &b = a.buffer();
  Buffer buffer;
  buffer.tensor = b.tensor();
  buffer.grad = b.grad();
  if (b.tensor() < 0) {
    buffer.shape.assign(b.shape().begin(), b.shape().end());
    for (int64_t d : buffer.shape)
      if (d < 0)
        return absl::InvalidArgumentError(
            "scratch buffer " + std::to_string(b.id()) + " has a negative dim");
    buffer.lo.assign(buffer.shape.size(), 0);
    buffer.hi = buffer.shape;
  } else {
    const Tensor &t = plan.tensors(b.tensor());
    buffer.shape.assign(t.shape().begin(), t.shape().end());
    buffer.lo.assign(b.box().lo().begin(), b.box().lo().end());
    buffer.hi.assign(b.box().hi().begin(), b.box().hi().end());
  }
  const DType dtype = dtypeOf(b.tensor());
  if (a.has_view()) {
    // Another buffer's memory, read as this box: nothing is allocated.
    const std::string what = "buffer " + std::to_string(b.id()) +
                             " is a view of buffer " + std::to_string(a.view());
    Buffer *base;
    if (absl::Status err = lookup(a.view(), base); !err.ok())
      return absl::InvalidArgumentError(what + ", which is not allocated");
    if (b.tensor() < 0 || base->tensor < 0)
      return absl::InvalidArgumentError(
          what + ": views hold boxes of tensors, not scratch");
    if (b.grad() != base->grad || base->dtype() != dtype ||
        base->size() != buffer.size())
      return absl::InvalidArgumentError(
          what + " of another type or size (" + std::to_string(buffer.size()) +
          " " + dtypeName(dtype) + (b.grad() ? " gradient" : "") +
          " elements against " + std::to_string(base->size()) + " " +
          dtypeName(base->dtype()) + (base->grad ? " gradient" : "") + ")");
    buffer.storage = base->storage;
  } else if (isPersistentBuffer(plan, a)) {
    auto it = persistent.find(b.id());
    if (it == persistent.end()) {
      absl::StatusOr<Persistent> p =
          newPersistent(b.tensor(), buffer.lo, buffer.hi, nullptr);
      if (!p.ok())
        return p.status();
      it = persistent.emplace(b.id(), std::move(*p)).first;
    } else if (it->second.tensor != b.tensor() || it->second.lo != buffer.lo ||
               it->second.hi != buffer.hi) {
      return absl::InvalidArgumentError(
          "weight buffer " + std::to_string(b.id()) + " of '" +
          tensorName(b.tensor()) + "' " + boxString(buffer.lo, buffer.hi) +
          " was " + boxString(it->second.lo, it->second.hi) + " of '" +
          tensorName(it->second.tensor) +
          "' before (from the previous step or the checkpoint)");
    }
    buffer.storage = it->second.storage;
  } else {
    // Never empty, so a view's data is null only where no gradient is wanted.
    buffer.storage = a.uninitialized()
                         ? backend.allocateUninitialized(dtype, buffer.size())
                         : backend.allocate(dtype, buffer.size());
    if (!buffer.storage)
      return absl::ResourceExhaustedError("out of memory");
  }
  live[b.id()] = std::move(buffer);
  return absl::OkStatus();
}

absl::Status ProgramRunner::load(Buffer &b, int32_t id) {
  if (b.tensor < 0 || b.grad)
    return absl::InvalidArgumentError(
        "load of buffer " + std::to_string(id) + ", which holds " +
        (b.grad ? "a gradient" : "scratch") + " and has no source");
  auto it = persistent.find(id);
  if (it != persistent.end()) {
    if (it->second.loaded)
      return absl::OkStatus();
    it->second.loaded = true;
  }
  std::vector<float> values;
  if (absl::Status err = inputValues(b, id, step_, values); !err.ok())
    return err;
  backend.write(*b.storage, 0, values.data(), b.size());
  // A 16-bit weight's master copy starts from the exact values.
  if (it != persistent.end() && it->second.master != it->second.storage)
    backend.write(*it->second.master, 0, values.data(), b.size());
  return absl::OkStatus();
}

absl::Status ProgramRunner::inputValues(const Buffer &b, int32_t id,
                                        int64_t step,
                                        std::vector<float> &values) {
  // Weights load once; a dataset (--data) prefetches its own batches. On
  // the cpu backend every core computes, so a thread drawing ahead would
  // only take one from a rank (and its time from the profile's kernels).
  const bool drawn = backend.queuesWork() && !persistent.count(id) &&
                     data.dataset() == nullptr &&
                     plan.tensors(b.tensor).role() == Tensor::INPUT;
  auto it = drawnInputs_.find(id);
  if (it != drawnInputs_.end() && it->second.step == step &&
      it->second.lo == b.lo && it->second.hi == b.hi) {
    auto [err, drawnValues] = it->second.values.get();
    if (!err.ok())
      return err;
    values = std::move(drawnValues);
  } else {
    values.resize(b.size());
    if (absl::Status err = data.load(b.tensor, b.lo, b.hi, step, values.data());
        !err.ok())
      return err;
  }
  if (!drawn)
    return absl::OkStatus();
  try {
    drawnInputs_[id] = {
        step + 1, b.lo, b.hi,
        std::async(std::launch::async, [this, tensor = b.tensor, lo = b.lo,
                                        hi = b.hi, step] {
          std::vector<float> next(boxVolume(lo, hi));
          absl::Status err = data.load(tensor, lo, hi, step + 1, next.data());
          return std::make_pair(std::move(err), std::move(next));
        })};
  } catch (const std::system_error &) {
    drawnInputs_.erase(id); // no thread to spare: the next step draws it
  }
  return absl::OkStatus();
}

absl::Status ProgramRunner::copy(const Instruction::Copy &c) {
  Buffer *src, *dst;
  if (absl::Status err = lookup(c.src(), src); !err.ok())
    return err;
  if (absl::Status err = lookup(c.dst(), dst); !err.ok())
    return err;
  Index lo(c.box().lo().begin(), c.box().lo().end());
  Index hi(c.box().hi().begin(), c.box().hi().end());
  if (!boxInside(lo, hi, src->lo, src->hi) ||
      !boxInside(lo, hi, dst->lo, dst->hi))
    return absl::InvalidArgumentError(
        "copy of box " + boxString(lo, hi) + " from buffer " +
        std::to_string(c.src()) + " " + boxString(src->lo, src->hi) +
        " to buffer " + std::to_string(c.dst()) + " " +
        boxString(dst->lo, dst->hi) + ": the box is not inside both");
  backend.copyBox(src->view(), dst->view(), lo, hi, c.accumulate());
  return absl::OkStatus();
}

absl::Status ProgramRunner::send(const Instruction::Send &s) {
  Buffer *b;
  if (absl::Status err = lookup(s.buffer(), b); !err.ok())
    return err;
  Index lo(s.box().lo().begin(), s.box().lo().end());
  Index hi(s.box().hi().begin(), s.box().hi().end());
  if (!boxInside(lo, hi, b->lo, b->hi))
    return absl::InvalidArgumentError(
        "send of box " + boxString(lo, hi) + " outside buffer " +
        std::to_string(s.buffer()) + " " + boxString(b->lo, b->hi));
  const int64_t n = boxVolume(lo, hi);
  std::shared_ptr<DeviceBuffer> message = backend.allocate(b->dtype(), n);
  if (!message)
    return absl::ResourceExhaustedError("out of memory for a message");
  backend.copyBox(b->view(), {message.get(), 0, b->shape, lo, hi}, lo, hi,
                  false);
  return comm.send(std::move(message), n, s.peer(), s.tag());
}

absl::Status ProgramRunner::recv(const Instruction::Recv &r) {
  Buffer *b;
  if (absl::Status err = lookup(r.buffer(), b); !err.ok())
    return err;
  Index lo(r.box().lo().begin(), r.box().lo().end());
  Index hi(r.box().hi().begin(), r.box().hi().end());
  if (!boxInside(lo, hi, b->lo, b->hi))
    return absl::InvalidArgumentError(
        "recv into box " + boxString(lo, hi) + " outside buffer " +
        std::to_string(r.buffer()) + " " + boxString(b->lo, b->hi));
  const int64_t n = boxVolume(lo, hi);
  auto where = [&] {
    return "recv (" + context() + ", peer " + std::to_string(r.peer()) +
           " tag " + std::to_string(r.tag()) + ")";
  };
  // The whole buffer can take the message directly.
  if (!r.accumulate() && lo == b->lo && hi == b->hi)
    return comm.recv(b->data(), b->dtype(), n, r.peer(), r.tag(), where);
  DeviceBuffer *staged = stagingBuffer(b->dtype(), n);
  if (!staged)
    return absl::ResourceExhaustedError("out of memory for a message");
  if (absl::Status err =
          comm.recv(staged->data(), b->dtype(), n, r.peer(), r.tag(), where);
      !err.ok())
    return err;
  backend.copyBox({staged, 0, b->shape, lo, hi}, b->view(), lo, hi,
                  r.accumulate());
  return absl::OkStatus();
}

absl::Status ProgramRunner::viewOf(int32_t id, int32_t tensor, bool grad,
                                   const char *what, size_t index,
                                   DeviceView &view) {
  if (id < 0) {
    const Tensor &t = plan.tensors(tensor);
    view = DeviceView{nullptr, 0, Index(t.shape().begin(), t.shape().end()),
                      Index(t.shape_size(), 0), Index(t.shape_size(), 0)};
    return absl::OkStatus();
  }
  Buffer *b;
  if (absl::Status err = lookup(id, b); !err.ok())
    return err;
  if (tensor >= 0 && (b->tensor != tensor || b->grad != grad))
    return absl::InvalidArgumentError(
        std::string(what) + " " + std::to_string(index) + " is buffer " +
        std::to_string(id) + " of " + (b->grad ? "the gradient of " : "") +
        "'" + tensorName(b->tensor) + "', not of " +
        (grad ? "the gradient of " : "") + "'" + tensorName(tensor) + "'");
  view = b->view();
  return absl::OkStatus();
}

/// Where a kernel's buffer lists do not match its op.
static absl::Status countMismatch(const Op &op, const char *what, int have,
                                  int want) {
  return absl::InvalidArgumentError(
      "kernel of op '" + op.name() + "' (" + op.kind() + ") has " +
      std::to_string(have) + " " + what + " for " + std::to_string(want));
}

std::string ProgramRunner::profileKey(const Op &op, const char *phase,
                                      const std::vector<DeviceView> &inputs) {
  std::vector<std::pair<Index, Index>> boxes;
  for (const DeviceView &v : inputs)
    boxes.push_back({v.lo, v.hi});
  return kernelProfileKey(plan, op, phase, boxes);
}

absl::Status
ProgramRunner::viewsOf(const google::protobuf::RepeatedField<int32_t> &ids,
                       const google::protobuf::RepeatedField<int32_t> *tensors,
                       bool grad, const char *what,
                       std::vector<DeviceView> &views) {
  for (int i = 0; i < ids.size(); ++i)
    if (absl::Status err = viewOf(ids.Get(i), tensors ? tensors->Get(i) : -1,
                                  grad, what, i, views[i]);
        !err.ok())
      return err;
  return absl::OkStatus();
}

absl::Status ProgramRunner::kernelError(int index,
                                        const absl::Status &status) const {
  const Instruction &instr = program.instructions(index);
  const bool forward = instr.has_kernel();
  const int32_t op =
      forward ? instr.kernel().op() : instr.kernel_backward().op();
  const int32_t stage =
      forward ? instr.kernel().stage() : instr.kernel_backward().stage();
  return annotate(status, "kernel error in op '" + plan.ops(op).name() + "' (" +
                              (forward ? "forward" : "backward") + ", stage " +
                              std::to_string(stage) + ")");
}

absl::Status ProgramRunner::kernel(const Instruction::Kernel &k) {
  const Op &op = plan.ops(k.op());
  if (k.inputs_size() != op.operands_size())
    return countMismatch(op, "inputs", k.inputs_size(), op.operands_size());
  if (k.outputs_size() != op.results_size())
    return countMismatch(op, "outputs", k.outputs_size(), op.results_size());
  std::vector<DeviceView> inputs(k.inputs_size()), outputs(k.outputs_size()),
      scratch(k.scratch_size());
  if (absl::Status err =
          viewsOf(k.inputs(), &op.operands(), false, "input", inputs);
      !err.ok())
    return err;
  if (absl::Status err =
          viewsOf(k.outputs(), &op.results(), false, "output", outputs);
      !err.ok())
    return err;
  if (absl::Status err =
          viewsOf(k.scratch(), nullptr, false, "scratch", scratch);
      !err.ok())
    return err;
  kernelKey_ = profileKey(op, "forward", inputs);
  // Read before the kernel runs: its output may be its input's buffer.
  if (keepGradients_ && kinked_[k.op()] && !inputs.empty() &&
      inputs[0].buffer) {
    std::vector<float> values(inputs[0].numElements());
    backend.read(*inputs[0].buffer, inputs[0].offset, values.size(),
                 values.data());
    kinkInputs_.push_back(
        {op.operands(0), inputs[0].lo, inputs[0].hi, std::move(values)});
  }
  KernelContext ctx{step_, plan.training(), k.stage(), index_};
  absl::Status status =
      backend.forward(descs[k.op()], ctx, inputs, outputs, scratch);
  if (!status.ok())
    return kernelError(index_, status);
  return absl::OkStatus();
}

absl::Status
ProgramRunner::kernelBackward(const Instruction::KernelBackward &k) {
  const Op &op = plan.ops(k.op());
  if (k.inputs_size() != op.operands_size())
    return countMismatch(op, "inputs", k.inputs_size(), op.operands_size());
  if (k.outputs_size() != op.results_size())
    return countMismatch(op, "outputs", k.outputs_size(), op.results_size());
  if (k.output_grads_size() != op.results_size())
    return countMismatch(op, "output gradients", k.output_grads_size(),
                         op.results_size());
  if (k.input_grads_size() != op.operands_size())
    return countMismatch(op, "input gradients", k.input_grads_size(),
                         op.operands_size());
  std::vector<DeviceView> inputs(k.inputs_size()), outputs(k.outputs_size()),
      outputGrads(k.output_grads_size()), inputGrads(k.input_grads_size()),
      scratch(k.scratch_size());
  if (absl::Status err =
          viewsOf(k.inputs(), &op.operands(), false, "input", inputs);
      !err.ok())
    return err;
  if (absl::Status err =
          viewsOf(k.outputs(), &op.results(), false, "output", outputs);
      !err.ok())
    return err;
  if (absl::Status err = viewsOf(k.output_grads(), &op.results(), true,
                                 "output gradient", outputGrads);
      !err.ok())
    return err;
  if (absl::Status err = viewsOf(k.input_grads(), &op.operands(), true,
                                 "input gradient", inputGrads);
      !err.ok())
    return err;
  if (absl::Status err =
          viewsOf(k.scratch(), nullptr, false, "scratch", scratch);
      !err.ok())
    return err;
  if (k.overwrite_size() != 0 && k.overwrite_size() != k.input_grads_size())
    return countMismatch(op, "overwrite entries", k.overwrite_size(),
                         k.input_grads_size());
  for (int i = 0; i < k.overwrite_size(); ++i)
    inputGrads[i].overwrite = k.overwrite(i) && inputGrads[i].buffer;
  // Results not kept for the backward (-1: reduce-scattered partial sums,
  // whose backward never reads them) have their gradient's box, no data.
  for (int r = 0; r < k.outputs_size(); ++r)
    if (k.outputs(r) < 0) {
      outputs[r] = outputGrads[r];
      outputs[r].buffer = nullptr;
    }
  kernelKey_ = profileKey(op, "backward", inputs);
  KernelContext ctx{step_, plan.training(), k.stage(), index_};
  absl::Status status = backend.backward(descs[k.op()], ctx, inputs, outputs,
                                         outputGrads, inputGrads, scratch);
  if (!status.ok())
    return kernelError(index_, status);
  return absl::OkStatus();
}

absl::Status ProgramRunner::update(const Instruction::Update &u) {
  Buffer *w, *g;
  if (absl::Status err = lookup(u.weight(), w); !err.ok())
    return err;
  if (absl::Status err = lookup(u.grad(), g); !err.ok())
    return err;
  auto it = persistent.find(u.weight());
  if (it == persistent.end() ||
      plan.tensors(w->tensor).role() != Tensor::WEIGHT)
    return absl::InvalidArgumentError(
        "update of buffer " + std::to_string(u.weight()) + " of '" +
        tensorName(w->tensor) + "', which is not a weight");
  // The gradient covers the weight's box, or (ZeRO) a shard of it along
  // dim 0: a contiguous block of its rows, which alone is updated.
  bool shard = g->grad && g->tensor == w->tensor &&
               isRowBlock(g->lo, g->hi, w->lo, w->hi);
  bool whole =
      g->grad && g->tensor == w->tensor && g->lo == w->lo && g->hi == w->hi;
  if (!whole && !shard)
    return absl::InvalidArgumentError(
        "update of weight '" + tensorName(w->tensor) + "' " +
        boxString(w->lo, w->hi) + " with buffer " + std::to_string(u.grad()) +
        ", which is not its gradient's box " + "or a shard of it along dim 0");
  const int64_t offset = whole ? 0 : rowOffset(w->lo, w->hi, g->lo[0]);
  updatedBoxes_[u.weight()] = {g->lo, g->hi};
  const double unscale = 1.0 / lossScale_.scale;
  if (keepGradients_) {
    std::vector<float> values = hostValues(*g->storage, g->size());
    for (float &v : values)
      v = static_cast<float>(v * unscale);
    keptGrads_.push_back({g->tensor, g->lo, g->hi, std::move(values)});
    updated_.push_back(u.weight());
  }
  if (skipUpdates_)
    return absl::OkStatus();
  Persistent &p = it->second;
  // Mixed precision: the model's 16-bit copy of the rows just updated is
  // rounded from the master as it goes.
  Backend::UpdateRequest request;
  request.weight = p.master.get();
  request.offset = offset;
  request.grad = g->storage.get();
  request.n = g->size();
  request.state = &p.optimizer;
  request.rounded = p.master != p.storage ? p.storage.get() : nullptr;
  pendingUpdates_.push_back(request);
  pendingUpdateTensors_.push_back(w->tensor);
  // Consecutive updates run together (one launch on the cuda backend).
  if (index_ + 1 < program.instructions_size() &&
      program.instructions(index_ + 1).has_update())
    return absl::OkStatus();
  return flushUpdates();
}

absl::Status ProgramRunner::flushUpdates() {
  if (pendingUpdates_.empty())
    return absl::OkStatus();
  size_t failed = 0;
  const bool done = backend.updateAll(plan.optimizer(), pendingUpdates_,
                                      1.0 / lossScale_.scale, failed);
  absl::Status error;
  if (!done)
    error = absl::ResourceExhaustedError(
        "out of memory for the optimizer state of '" +
        tensorName(pendingUpdateTensors_[std::min(
            failed, pendingUpdateTensors_.size() - 1)]) +
        "'");
  pendingUpdates_.clear();
  pendingUpdateTensors_.clear();
  return error;
}

void ProgramRunner::checkGradients() {
  gradientsChecked_ = true;
  bool overflow = false;
  for (const Instruction &instr : program.instructions()) {
    if (!instr.has_update())
      continue;
    auto it = live.find(instr.update().grad());
    if (it != live.end() &&
        backend.anyNonfinite(*it->second.storage, it->second.size())) {
      overflow = true;
      break;
    }
  }
  skipUpdates_ = comm.anyRank(overflow, [&] {
    return "the gradients' overflow check (" + context() + ")";
  });
}

absl::Status ProgramRunner::output(const Instruction::Output &o) {
  Buffer *b;
  if (absl::Status err = lookup(o.buffer(), b); !err.ok())
    return err;
  const Index zero(b->shape.size(), 0);
  if (b->tensor < 0 || b->grad || b->lo != zero || b->hi != b->shape)
    return absl::InvalidArgumentError(
        "output buffer " + std::to_string(o.buffer()) +
        " does not hold the whole tensor '" + tensorName(b->tensor) + "'");
  // Kept on the device and read once the step's work is done: no host
  // read mid-step (the buffer may be freed before then).
  std::shared_ptr<DeviceBuffer> &kept = outputCopies_[b->tensor];
  if (!kept || kept->dtype() != b->dtype() || kept->size() < b->size())
    kept = backend.allocate(b->dtype(), b->size());
  if (!kept)
    return absl::ResourceExhaustedError("out of memory for output '" +
                                        tensorName(b->tensor) + "'");
  backend.copyBox(b->view(), {kept.get(), 0, b->shape, b->lo, b->hi}, b->lo,
                  b->hi, /*accumulate=*/false);
  pendingOutputs_.emplace_back(b->tensor, b->size());
  return absl::OkStatus();
}

std::string ProgramRunner::traceName(const Instruction &instr) const {
  auto nameOf = [&](int32_t id) {
    auto it = live.find(id);
    return it == live.end() ? std::string("?") : tensorName(it->second.tensor);
  };
  switch (instr.kind_case()) {
  case Instruction::kKernel:
    return plan.ops(instr.kernel().op()).name() + " fwd";
  case Instruction::kKernelBackward:
    return plan.ops(instr.kernel_backward().op()).name() + " bwd";
  case Instruction::kUpdate:
    return "update " + nameOf(instr.update().weight());
  case Instruction::kLoad:
    return "load " + nameOf(instr.load().buffer());
  case Instruction::kFill:
    return "fill " + nameOf(instr.fill().buffer());
  case Instruction::kCopy:
    return "copy " + nameOf(instr.copy().dst());
  case Instruction::kSend:
    return "send " + nameOf(instr.send().buffer()) + " to " +
           std::to_string(instr.send().peer());
  case Instruction::kRecv:
    return "recv " + nameOf(instr.recv().buffer()) + " from " +
           std::to_string(instr.recv().peer());
  case Instruction::kCollective:
    return std::string(collectiveName(instr.collective().kind())) + " " +
           nameOf(instr.collective().buffer());
  default:
    return "";
  }
}

std::vector<float> ProgramRunner::persistentValues(int32_t id,
                                                   const Persistent &p) const {
  const int64_t n = boxVolume(p.lo, p.hi);
  if (p.master == p.storage)
    return hostValues(*p.storage, n);
  std::vector<float> values = hostValues(*p.master, n);
  // Rows outside this rank's ZeRO shard come from other ranks' masters,
  // gathered into the 16-bit copy only.
  auto it = updatedBoxes_.find(id);
  if (it == updatedBoxes_.end() ||
      (it->second.first == p.lo && it->second.second == p.hi))
    return values;
  std::vector<float> gathered = hostValues(*p.storage, n);
  const int64_t begin = rowOffset(p.lo, p.hi, it->second.first[0]);
  const int64_t end = begin + boxVolume(it->second.first, it->second.second);
  std::copy(values.begin() + begin, values.begin() + end,
            gathered.begin() + begin);
  return gathered;
}

std::vector<BoxValues> ProgramRunner::updatedWeights() const {
  std::vector<BoxValues> out;
  for (int32_t id : updated_) {
    const Persistent &p = persistent.at(id);
    out.push_back({p.tensor, p.lo, p.hi, persistentValues(id, p)});
  }
  return out;
}

std::vector<BoxValues> ProgramRunner::trainedWeights() const {
  std::vector<BoxValues> out;
  for (const auto &[id, p] : persistent) {
    if (!p.loaded)
      continue;
    Index lo = p.lo, hi = p.hi;
    int64_t offset = 0;
    if (auto it = updatedBoxes_.find(id);
        it != updatedBoxes_.end() &&
        (it->second.first != p.lo || it->second.second != p.hi)) {
      // Rows [lo0, hi0) of the buffer, whose other dims are whole.
      lo = it->second.first;
      hi = it->second.second;
      offset = rowOffset(p.lo, p.hi, lo[0]);
    }
    std::vector<float> values = persistentValues(id, p);
    auto begin = values.begin() + offset;
    out.push_back({p.tensor, lo, hi,
                   std::vector<float>(begin, begin + boxVolume(lo, hi))});
  }
  return out;
}

std::vector<BoxValues> ProgramRunner::frozenBuffers() const {
  std::vector<BoxValues> out;
  for (const auto &[id, p] : persistent)
    if (plan.tensors(p.tensor).role() == Tensor::FROZEN && p.loaded)
      out.push_back({p.tensor, p.lo, p.hi, persistentValues(id, p)});
  return out;
}

void ProgramRunner::saveState(Checkpoint &checkpoint) const {
  checkpoint.optimizerSlots = numOptimizerSlots(plan.optimizer());
  checkpoint.lossScale = lossScale_.scale;
  checkpoint.lossScaleGoodSteps = lossScale_.goodSteps;
  checkpoint.buffers.clear();
  for (const auto &[id, p] : persistent) {
    CheckpointBuffer b;
    b.buffer = id;
    b.tensor = p.tensor;
    b.tensorName = plan.tensors(p.tensor).name();
    b.lo = p.lo;
    b.hi = p.hi;
    auto updated = updatedBoxes_.find(id);
    b.stateLo = updated != updatedBoxes_.end() ? updated->second.first : p.lo;
    b.stateHi = updated != updatedBoxes_.end() ? updated->second.second : p.hi;
    b.values = persistentValues(id, p);
    b.optimizer.steps = p.optimizer.steps;
    for (const std::shared_ptr<DeviceBuffer> &slot : p.optimizer.slots)
      b.optimizer.slots.push_back(hostValues(*slot, p.optimizer.elements));
    checkpoint.buffers.push_back(std::move(b));
  }
}

absl::StatusOr<ProgramRunner::Persistent>
ProgramRunner::newPersistent(int32_t tensor, const Index &lo, const Index &hi,
                             const std::vector<float> *values) {
  Persistent p;
  p.tensor = tensor;
  p.lo = lo;
  p.hi = hi;
  const DType dtype = dtypeOf(tensor);
  const int64_t n = boxVolume(lo, hi);
  p.storage = backend.allocate(dtype, n);
  // A 16-bit weight keeps a float32 master the optimizer updates.
  p.master =
      dtype == DType::F32 || plan.tensors(tensor).role() != Tensor::WEIGHT
          ? p.storage
          : backend.allocate(DType::F32, n);
  if (!p.storage || !p.master)
    return absl::ResourceExhaustedError("out of memory for the weights of '" +
                                        tensorName(tensor) + "' " +
                                        boxString(lo, hi));
  if (values) {
    backend.write(*p.storage, 0, values->data(), n);
    if (p.master != p.storage)
      backend.write(*p.master, 0, values->data(), n);
    p.loaded = true;
  }
  return p;
}

absl::Status ProgramRunner::restoreState(const Checkpoint &checkpoint) {
  if (checkpoint.optimizerSlots != numOptimizerSlots(plan.optimizer()))
    return absl::InvalidArgumentError(
        "the checkpoint's optimizer state does not fit the plan's optimizer");
  // The scale goes on where it was (its mode is this run's).
  if (checkpoint.lossScale > 0) {
    lossScale_.scale = checkpoint.lossScale;
    lossScale_.goodSteps = checkpoint.lossScaleGoodSteps;
  }
  persistent.clear();
  for (const CheckpointBuffer &b : checkpoint.buffers) {
    if (b.tensor < 0 || b.tensor >= plan.tensors_size() ||
        !isPersistentRole(plan.tensors(b.tensor)))
      return absl::InvalidArgumentError(
          "the checkpoint holds buffer " + std::to_string(b.buffer) +
          " of tensor " + std::to_string(b.tensor) +
          ", which is not a weight of this plan");
    const Tensor &t = plan.tensors(b.tensor);
    if (!boxInside(b.lo, b.hi, Index(t.shape_size(), 0),
                   Index(t.shape().begin(), t.shape().end())))
      return absl::InvalidArgumentError("the checkpoint's box " +
                                        boxString(b.lo, b.hi) + " of '" +
                                        t.name() + "' is outside the tensor");
    const int64_t n = boxVolume(b.lo, b.hi);
    if (static_cast<int64_t>(b.values.size()) != n)
      return absl::InvalidArgumentError(
          "the checkpoint's buffer " + std::to_string(b.buffer) + " of '" +
          t.name() + "' holds " + std::to_string(b.values.size()) +
          " values for a box of " + std::to_string(n));
    PPC_ASSIGN_OR_RETURN(Persistent p,
                         newPersistent(b.tensor, b.lo, b.hi, &b.values));
    p.optimizer.steps = b.optimizer.steps;
    p.optimizer.elements =
        b.optimizer.slots.empty()
            ? 0
            : static_cast<int64_t>(b.optimizer.slots.front().size());
    for (const std::vector<float> &slot : b.optimizer.slots) {
      p.optimizer.slots.push_back(
          backend.allocate(DType::F32, static_cast<int64_t>(slot.size())));
      if (!p.optimizer.slots.back())
        return absl::ResourceExhaustedError(
            "out of memory for the checkpoint's optimizer state");
      backend.write(*p.optimizer.slots.back(), 0, slot.data(),
                    static_cast<int64_t>(slot.size()));
    }
    // Slots that were never used are stored as zeros; keep them unsized so
    // the first update sizes them, as in an uninterrupted run.
    if (p.optimizer.steps == 0)
      p.optimizer.slots.clear();
    persistent.emplace(b.buffer, std::move(p));
  }
  return absl::OkStatus();
}

absl::Status
ProgramRunner::restoreResharded(const std::vector<Checkpoint> &saved) {
  PPC_ASSIGN_OR_RETURN(Checkpoint mine,
                       reshardCheckpoint(saved, plan, program.rank()));
  return restoreState(mine);
}

} // namespace ppc::runtime
