"""Tensors a recording's hooks hold by reference, to be histogrammed and read together later.

On an accelerator each module output and gradient histogrammed at its hook costs a launch and its
Python; held, a forward's or a backward's tensors go to one launch per dtype when the recorder
next looks (the forward's end, the backward's end, step(), or HELD_BYTES held). A tensor changed in
place between its hook and that look (ReLU(inplace=True) after a BatchNorm, `x += y` in a parent's
forward) would be histogrammed as it is then, not as its module made it, so a tensor is held only
where it is known not to change:

- a key (record name, kind) seen for the first time is read at its hook, as without holding, and
  its tensor watched (probe): its version counter unchanged at the next look makes the key held
  from then on; changed, the key is read at its hook for the rest of the run;
- a held tensor found changed at the look (a model whose in-place ops depend on the data) is not
  read at all for that step -- no reading is better than a reading of other values -- and its
  key is read at its hook from then on.
"""

HELD_BYTES = 256 << 20  # held and watched tensors past this size are looked at at once: bounds the memory held


def version_of(tensor):
    """The tensor's version counter (in-place ops advance it), or None where it has none."""
    try:
        return tensor._version
    except (RuntimeError, AttributeError):  # an inference tensor, or a subclass without one
        return None


class Held:
    """One recorder's held and watched tensors, and what it has learnt about its keys."""

    def __init__(self, budget=HELD_BYTES):
        self.budget = budget
        self._held = []        # (key, tensor, version, payload)
        self._probes = []      # (key, tensor, version)
        self._bytes = 0
        self._safe = set()     # keys whose tensors stayed as their hook saw them
        self._changing = set() # keys whose tensors were changed in place after their hook

    def holds(self, key):
        """Whether `key`'s tensors are held (else read at their hook)."""
        return key in self._safe

    @staticmethod
    def can_hold(tensor):
        """Whether `tensor` has a version counter to hold it by (not an inference tensor)."""
        return version_of(tensor) is not None

    def hold(self, key, tensor, payload):
        """Holds `tensor` (can_hold) for `key` with `payload` (what the look needs of it)."""
        self._held.append((key, tensor, tensor._version, payload))
        self._bytes += tensor.numel() * tensor.element_size()

    def watch(self, key, tensor):
        """A tensor of a key not yet known, read at its hook: watched until the next look."""
        if key in self._safe or key in self._changing:
            return
        version = version_of(tensor)
        if version is None:
            self._changing.add(key)
            return
        self._probes.append((key, tensor, version))
        self._bytes += tensor.numel() * tensor.element_size()

    @property
    def full(self):
        """Whether the tensors held and watched reached the budget: the caller looks now."""
        return self._bytes >= self.budget

    @property
    def empty(self):
        return not self._held and not self._probes

    def look(self):
        """Ends the holding: [(key, tensor, payload)] of the held tensors as their hooks saw them,
        and [(key, payload)] of those changed since (not to be read this step). Learns from the
        watched tensors."""
        for key, tensor, version in self._probes:
            if tensor._version == version and key not in self._changing:
                self._safe.add(key)
            else:
                self._safe.discard(key)
                self._changing.add(key)
        unchanged, changed = [], []
        for key, tensor, version, payload in self._held:
            if tensor._version == version:
                unchanged.append((key, tensor, payload))
            else:
                changed.append((key, payload))
                self._safe.discard(key)
                self._changing.add(key)
        self._held, self._probes, self._bytes = [], [], 0
        return unchanged, changed

    def drop(self):
        """Lets everything held go unread (a step abandoned at close())."""
        self._held, self._probes, self._bytes = [], [], 0
