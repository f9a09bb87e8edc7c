"""Step 0 of a module track before the script's first next_step()/set_step().

Until a script calls next_step() or set_step(), a track cannot tell a second training
forward of its model from a new step. Two readings exist:

- the *auto* reading (a script that never calls them): each training forward of the model
  is a step of the track's own count, gated by every_n;
- the *client* reading (a script that calls next_step() at the end of each step): every
  forward so far belongs to the client's step 0 (a GAN's discriminator called three times,
  micro-batches of gradient accumulation, a siamese net's two branches).

From the model's second training forward on, the track keeps what its hooks would send,
under both readings, in a StepZeroWindow (copies, at most HOLD_BYTES; what does not fit is
refused and counted), and the summaries of what they would summarise (taken at once, so a
NaN in step 0's second call is reported at step 0), until it knows which reading is right:

- the first next_step()/set_step(): the client reading (see ModuleTrack.steps_became_explicit);
- a second update of the model's trainable parameters seen without it (a script that calls
  next_step() would have done so by the end of step 0, before the second update), or
  HOLD_FORWARDS forwards, or the track's end: the auto reading.

Then the held values are sent as that reading names and stamps them, and nothing taken
for the other reading leaks into later steps.
"""

HOLD_BYTES = 64 << 20
HOLD_FORWARDS = 1024  # as many calls as a step may have (MAX_CALLS_PER_STEP)
HOLD_SUMMARIES = 1 << 16  # summaries kept while the reading is unknown


def trainable_version(params):
    """A number that changes whenever one of `params` is written in place (an optimizer's
    update): the sum of their version counters."""
    return sum(p._version for p in params)


def call_name(stream, call):
    """The stream of a module's `call`-th call in a step ("<stream>#<call>" after the first)."""
    return stream if call == 0 else f"{stream}#{call}"


class StepZeroWindow:
    """What a track took from its model's second training forward before the first
    next_step()/set_step(), held until the reading is known. A target is (stream, step,
    call) or None (not sent under that reading); the client reading's step is None (the
    step the window was in, known when it closes). The track's lock guards it."""

    def __init__(self, version, calls, input_calls, summarizing):
        self.calls = dict(calls)  # stream -> output calls in step 0 under the client reading
        self.input_calls = dict(input_calls)  # stream -> input calls, the same
        self.open = True  # the auto reading sends the current forward's step
        self.summarizing = summarizing  # the auto reading summarises the current forward's step
        self.forwards = 1  # training forwards of the model in the window
        self.updates = 0  # parameter updates seen between them
        self.version = version
        self.held = []  # (tensor copy, kind, ValueMeta (its call set when sent), auto target, client target, labels)
        self.summaries = []  # (summary, kind, auto target, client target)
        self.bytes = 0
        self.marks = []  # tree log positions where the auto reading began a step, and its gate

    def count(self, counts, stream):
        call = counts.get(stream, 0)
        counts[stream] = call + 1
        return call

    def forward(self, version):
        """A training forward of the model; True when the auto reading is now certain."""
        self.forwards += 1
        if version != self.version:
            self.version = version
            self.updates += 1
        return self.updates >= 2 or self.forwards >= HOLD_FORWARDS

    def auto_step_began(self, send, stats, tree):
        """The auto reading began a step (sent or not, summarised or not): mark where its
        calls start."""
        self.marks.append((tree.position if tree is not None else 0, self.open))
        self.open = send
        self.summarizing = stats

    def hold(self, tensor, kind, meta, auto, client, labels=None):
        """Keeps a copy of `tensor` (and its rows' `labels`) for the reading that will be
        chosen; False when it does not fit (the caller counts it)."""
        if auto is None and client is None:
            return True
        size = tensor.numel() * tensor.element_size()
        if self.bytes + size > HOLD_BYTES:
            return False
        self.bytes += size
        self.held.append((tensor.detach().clone(), kind, meta, auto, client, labels))
        return True

    def hold_summary(self, summary, kind, auto, client):
        """Keeps a value's summary (summarize()'s result) for the reading that will be
        chosen; False when HOLD_SUMMARIES are kept already (the caller counts it)."""
        if auto is None and client is None:
            return True
        if len(self.summaries) >= HOLD_SUMMARIES:
            return False
        self.summaries.append((summary, kind, auto, client))
        return True
