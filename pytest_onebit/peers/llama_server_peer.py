"""`onebit peer llama-server`: llama.cpp's own server, started here once without speculation
and once per speculation arm, every speculative answer held to the plain server's answer to
the same request (docs/peers.md, "The llama-server peer").

An arm is one way llama-server speculates: each draft-free `--spec-type` (the n-gram
drafters, with keys short enough to draft on the prompts here), and a draft model whose
quality is known, made from the target itself (`onebit.gguf.derive`):

- `draft-perfect`: the target as its own draft. Every draft is the target's own greedy
  choice, so every one must be accepted (A1-drafted says how many were);
- `draft-half`: the target's first two thirds of its blocks: often right, often not, so the
  accept and the rollback paths both run;
- `draft-garbage`: random weights with the target's vocabulary: nearly every draft is
  rejected, so the server keeps rolling back;
- `draft-half-sampled`: the half draft with `--spec-draft-sampling probabilistic`: at a
  temperature the draft is sampled and verified by rejection against its q, which overlaps
  the target's p (the same model, cut), so the accept ratio and the residual both run. Greedy,
  it must still equal plain; sampled, it is the arm S1 (`--sampled`) is sharp on.

and `--spec-type draft-eagle3`, an EAGLE-3 head that reads the target's hidden rows, made by
llama.cpp's own converter from onebit's speculators export (`eagle3_drafts`):

- `draft-eagle3`: the head onebit ships for the target (not an exact EAGLE-3 version of it:
  docs/heads.md; the contract needs no good draft);
- `draft-eagle3-random`: a seeded random head of the same shapes: nearly every draft rejected.

and the block drafters (docs/peers.md, "The MTP, DFlash and DSpark arms"):

- `draft-mtp` / `draft-mtp-random`: `--spec-type draft-mtp`, whose MTP block lives in the
  target's own GGUF and only for architectures with an MTP graph (not SmolLM2's llama), so
  these arms hold a fabricated glm4moe target with one (`mtp_drafts`: a head that proposes
  the trunk's bigram guess, often accepted, and a random one), each against a plain server
  started on that same file;
- `draft-dflash` / `draft-dspark`: a random DFlash draft (and the same with DSpark's Markov
  head) for the target, converted by llama.cpp's converter (`dflash_drafts`).

They run only when asked for by name (`--arm draft-eagle3`), and (but the MTP arms) need the
llama.cpp source tree the binary was built from (`--llama-cpp-src`, `$ONEBIT_LLAMA_CPP_SRC`,
or found above the binary), torch and transformers; without them the peer cannot run (exit
2, the reason said).

Every arm must give exactly the plain server's greedy token ids. The checks the OpenAI arm
defines (`openai_peer`, I10-eos among them) run on both endpoints, `/v1/completions` and
`/v1/chat/completions`, with llama-server's `return_tokens` and `verbose` so the ids come back.
The checks below are llama-server's own:

- A1-drafted: the server's `/metrics` counters say speculation really ran, and the perfect
  draft had every draft accepted where the answer ends at its budget (a draft past an
  end-of-turn token, a stop or the context has no target token to match, and llama.cpp does
  not accept a drafted end-of-generation token);
- I2-slot-reuse: a slot reused for a prompt that extends its last answer answers as plain (no
  rolled-back draft stays in the slot's cache);
- I11-context: a prompt that nearly fills the slot's context: no draft runs past it.

Sampled output (S1) is opt-in, as for the OpenAI arm: black-box, a distribution can only be
tested, not proved equal; onebit's own sampled loop is proved by enumeration.

The plain server and each arm's server are stopped whatever happens (`close()`, which
`run_peer` calls, and `ServerProcess`).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pytest_onebit.peers.openai_client import ServerError, Unreachable
from pytest_onebit.peers.openai_peer import CHECKS as SERVED_CHECKS
from pytest_onebit.peers.openai_peer import (
    EOS_BUDGET,
    EOS_CHATS,
    EndpointArm,
    OpenAIPeer,
    _diverges,
    _ids,
    _text,
)
from pytest_onebit.peers.protocol import (
    FAILED,
    NOT_APPLICABLE,
    Outcome,
    chosen,
    failed,
    not_applicable,
    passed,
)
from pytest_onebit.peers.served_metrics import Metrics, read_metrics
from pytest_onebit.peers.server_process import ServerFailed, ServerProcess, find_server

CHECKS = ("A1-drafted", *[c for c in SERVED_CHECKS if c != "S1-distribution"],
          "I2-slot-reuse", "I11-context", "S1-distribution")
#: llama-server's switches that put the answer's token ids in the response (`__verbose`)
FIELDS = {"return_tokens": True, "verbose": True}
#: N4: the knobs under llama-server's own names (it takes OpenAI's penalties and logit_bias)
KNOB_NAMES = {"repetition_penalty": "repeat_penalty"}
SLOTS = 3          # C1-concurrent sends 3 requests at once: one slot each
CONTEXT = 512 * SLOTS
# I11-context: the prompt leaves this many tokens of the slot's context, each in turn (6
# first). One edge is not enough: whether an accepted block falls on the context's end
# depends on where drafting starts, and with one edge (6) the draft-mtp arm passed while 9
# of 30 edges from 2 to 11 cut its answer short (docs/peers.md, the MTP arms)
EDGES = (6, 2, 3, 4, 5, 7, 8, 9, 10, 11)
DRAFT_MAX = 4      # drafts per round for a draft model (llama.cpp's default is 3)

# n-gram keys of 2 tokens (llama.cpp's defaults, 12 and 24, draft nothing on short prompts)
NGRAM = {"ngram-simple": ("--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8"),
         "ngram-map-k": ("--spec-ngram-map-k-size-n", "2", "--spec-ngram-map-k-size-m", "8"),
         "ngram-map-k4v": ("--spec-ngram-map-k4v-size-n", "2",
                           "--spec-ngram-map-k4v-size-m", "8"),
         "ngram-mod": ("--spec-ngram-mod-n-match", "2", "--spec-ngram-mod-n-min", "1",
                       "--spec-ngram-mod-n-max", "8"),
         "ngram-cache": ()}
DRAFT_ARMS = ("draft-perfect", "draft-half", "draft-garbage", "draft-half-sampled")
# `--spec-type draft-eagle3`: an EAGLE-3 head converted by llama.cpp from onebit's export
# (pytest_onebit/peers/eagle3_drafts.py), the arm's name to the head it exports
EAGLE3_ARMS = {"draft-eagle3": "shipped", "draft-eagle3-random": "random"}
# `--spec-type draft-mtp`: the MTP block inside the target's own GGUF, which SmolLM2's arch
# (llama) has no graph for, so these arms hold a fabricated glm4moe target with one
# (pytest_onebit/peers/mtp_drafts.py), against a plain server on that same file; the arm's
# name to the MTP head
MTP_ARMS = {"draft-mtp": "bigram", "draft-mtp-random": "random"}
# `--spec-type draft-dflash` / `draft-dspark`: a random DFlash / DSpark draft converted by
# llama.cpp for the target (pytest_onebit/peers/dflash_drafts.py)
DFLASH_ARMS = {"draft-dflash": "dflash", "draft-dspark": "dspark"}
ARM_NAMES = (*NGRAM, *DRAFT_ARMS, *EAGLE3_ARMS, *MTP_ARMS, *DFLASH_ARMS)
# the arms a run without --arm holds: the EAGLE-3, MTP, DFlash and DSpark arms are asked for
# by name, since their drafts need more than a binary (llama.cpp's source tree, torch,
# transformers, a conversion or a fabrication the first time), which a run of the default
# arms, and CI's machine, should not depend on
DEFAULT_ARMS = (*NGRAM, *DRAFT_ARMS)

# I2-slot-reuse: each request's prompt is the last prompt, its answer and this
FOLLOW_UPS = ("\nA: hello\nB:", "\nA: goodbye\nB: goodbye\nA:")


def counters(url: str) -> Metrics:
    """llama-server's counters; it serves them with `--metrics`, which every server here
    gets, so a page without them is an error, not zero."""
    found = read_metrics(url)
    if found is None:
        raise ServerError(0, f"{url}/metrics has no spec_decode counters")
    return found


def server_version(binary: Path) -> str:
    """What `llama-server --version` says of its build ("0.6.0-dev (build 0, commit
    unknown)" for one built from a source distribution, which carries no git history)."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"
    m = re.search(r"version:\s*(.+)", done.stdout + done.stderr)
    return m.group(1).strip() if m else "unknown build"


CHECK_DOCS = {
    "A1-drafted": "the server drafted (its /metrics counters), and a perfect draft had every "
                  "draft accepted",
    "I1-stream": "streamed text joined equals the non-streamed answer",
    "L1-logprobs": "logprobs and top alternatives equal plain's within a stated tolerance",
    "C1-concurrent": "requests in parallel slots answer as each does alone",
    "I2-slot-reuse": "a reused slot answers a prompt extending its last answer as plain does",
    "I11-context": "a prompt near the slot's context: no draft past it, plain's answer",
    "C2-concurrent-scale": "8 staggered clients, streamed and not, greedy and seeded-sampled: "
                           "each answer as alone",
    "N4-knobs": "each knob (penalties, repeat_penalty, logit_bias, min_tokens): speculation's "
                "ids equal plain's, or refused, or no effect",
}


class LlamaServerPeer:
    """`onebit peer llama-server [--server-bin PATH] [--model FILE.gguf]`."""

    name = "llama-server"
    checks = CHECKS
    check_docs = CHECK_DOCS

    def __init__(self, server_bin: str | None = None, model: str | None = None, *,
                 arms: tuple[str, ...] | None = None, only: tuple[str, ...] | None = None,
                 sampled: bool = False, delta: float | None = None, threads: int = 2,
                 llama_cpp_src: str | None = None) -> None:
        self.server_bin = server_bin
        self.model_arg = model
        self.arm_names = (chosen(arms, ARM_NAMES, "llama-server peer arm")
                          if arms is not None else DEFAULT_ARMS)
        self.llama_cpp_src = llama_cpp_src
        self.only = chosen(only, CHECKS, "llama-server peer check")
        self.sampled = sampled
        self.delta = delta
        self.threads = threads
        self.binary: Path | None = None
        self.model: Path | None = None
        self.drafts: dict[str, Path] = {}
        self.plain: ServerProcess | None = None
        self.build = "?"

    # -- the runner's protocol --------------------------------------------------------------

    def unavailable(self) -> str | None:
        try:
            self.binary = find_server(self.server_bin)
        except ServerFailed as error:
            return str(error)
        if self.binary is None:
            return ("no llama-server binary: pass --server-bin PATH, set $ONEBIT_LLAMA_SERVER, "
                    "or put llama-server on PATH (docs/tools.md: building llama-server)")
        reason = self._find_model()
        if reason is not None:
            return reason
        self.build = server_version(self.binary)
        if any(a in ("draft-half", "draft-garbage", "draft-half-sampled")
               for a in self.arm_names):
            from onebit.gguf.derive import derived_drafts
            from onebit.models.errors import ModelFileError

            try:
                self.drafts = derived_drafts(self.model)
            except (ModelFileError, ValueError) as error:
                return f"cannot make the drafts from {self.model}: {error}"
        for make in (self._eagle3_drafts, self._mtp_targets, self._dflash_drafts):
            reason = make()
            if reason is not None:
                return reason
        self.plain = ServerProcess(self.argv(), name="llama-server (plain)")
        try:
            self.plain.start()
        except ServerFailed as error:
            self.plain = None
            return f"the plain server did not start: {error}"
        return None

    def _eagle3_drafts(self) -> str | None:
        """Make (or find cached) the EAGLE-3 drafts the chosen arms need; the reason the peer
        cannot run when they cannot be made."""
        heads = tuple(EAGLE3_ARMS[a] for a in self.arm_names if a in EAGLE3_ARMS)
        if not heads:
            return None
        from pytest_onebit.peers.eagle3_drafts import (
            Eagle3DraftError,
            eagle3_drafts,
            find_llama_cpp_source,
        )

        try:
            source = find_llama_cpp_source(self.llama_cpp_src, self.binary)
            made = eagle3_drafts(self.model, source, heads=heads)
        except Eagle3DraftError as error:
            return f"cannot make the EAGLE-3 drafts: {error}"
        self.drafts.update({f"eagle3-{head}": path for head, path in made.items()})
        return None

    def _mtp_targets(self) -> str | None:
        """Make (or find cached) the fabricated MTP targets the chosen arms need, with the
        vocabulary of the peer's model."""
        heads = tuple(MTP_ARMS[a] for a in self.arm_names if a in MTP_ARMS)
        if not heads:
            return None
        from pytest_onebit.peers.mtp_drafts import MtpDraftError, mtp_targets

        try:
            made = mtp_targets(self.model, heads=heads)
        except MtpDraftError as error:
            return f"cannot make the MTP targets: {error}"
        self.drafts.update({f"mtp-{head}": path for head, path in made.items()})
        return None

    def _dflash_drafts(self) -> str | None:
        """Make (or find cached) the DFlash / DSpark drafts the chosen arms need."""
        kinds = tuple(DFLASH_ARMS[a] for a in self.arm_names if a in DFLASH_ARMS)
        if not kinds:
            return None
        from pytest_onebit.peers.dflash_drafts import dflash_drafts
        from pytest_onebit.peers.eagle3_drafts import DraftMakeError, find_llama_cpp_source

        try:
            source = find_llama_cpp_source(self.llama_cpp_src, self.binary)
            made = dflash_drafts(self.model, source, kinds=kinds)
        except DraftMakeError as error:
            return f"cannot make the {'/'.join(kinds)} drafts: {error}"
        self.drafts.update(made)
        return None

    def arm_model(self, arm: str) -> Path:
        """The target an arm holds: the peer's model, or for an MTP arm the fabricated
        target that carries its MTP block."""
        if arm in MTP_ARMS:
            return self.drafts[f"mtp-{MTP_ARMS[arm]}"]
        return self.model

    def _find_model(self) -> str | None:
        if self.model_arg is not None:
            path = Path(self.model_arg).expanduser()
            if not path.is_file():
                return f"--model names {str(path)!r}, which is not a file"
            self.model = path.resolve()
            return None
        from onebit.hub import cached

        self.model = cached("smollm2")
        if self.model is None:
            return ("SmolLM2 is not in onebit's cache: run `onebit pull smollm2`, or pass "
                    "--model FILE.gguf")
        return None

    def version(self) -> str:
        return f"llama.cpp {self.build}, {self.binary}, {self.model.name}"

    def arms(self) -> list[ServerArm]:
        return [ServerArm(self, name) for name in self.arm_names]

    def close(self) -> None:
        if self.plain is not None:
            self.plain.stop()
            self.plain = None

    # -- servers ----------------------------------------------------------------------------

    def argv(self, *spec: str, model: Path | None = None) -> list[str]:
        """The command line every server shares (the plain one is this alone), on the peer's
        model or `model`."""
        return [str(self.binary), "-m", str(model or self.model), "-c", str(CONTEXT),
                "-np", str(SLOTS),
                "-t", str(self.threads), "-tb", str(self.threads), "--metrics", "--no-warmup",
                *spec]

    def spec_flags(self, arm: str) -> list[str]:
        if arm in NGRAM:
            return ["--spec-type", arm, *NGRAM[arm]]
        if arm in EAGLE3_ARMS:
            draft = self.drafts.get(f"eagle3-{EAGLE3_ARMS[arm]}")
            return ["--spec-type", "draft-eagle3", "-md", str(draft), "--spec-draft-n-max",
                    str(DRAFT_MAX), "-td", str(self.threads)]
        if arm in MTP_ARMS:  # the MTP block is in the target itself: no -md
            return ["--spec-type", "draft-mtp", "--spec-draft-n-max", str(DRAFT_MAX),
                    "-td", str(self.threads)]
        if arm in DFLASH_ARMS:
            kind = DFLASH_ARMS[arm]
            return ["--spec-type", f"draft-{kind}", "-md", str(self.drafts.get(kind)),
                    "--spec-draft-n-max", str(DRAFT_MAX), "-td", str(self.threads)]
        draft = {"draft-perfect": self.model, "draft-half": self.drafts.get("half"),
                 "draft-garbage": self.drafts.get("garbage"),
                 "draft-half-sampled": self.drafts.get("half")}[arm]
        sampling = (["--spec-draft-sampling", "probabilistic"]
                    if arm == "draft-half-sampled" else [])
        return ["--spec-type", "draft-simple", "-md", str(draft), "--spec-draft-n-max",
                str(DRAFT_MAX), "-td", str(self.threads), *sampling]


class ServerArm:
    """One speculation arm: its own server, started for `judge()` and stopped after it."""

    def __init__(self, peer: LlamaServerPeer, name: str) -> None:
        self.peer = peer
        self.name = name
        flags = peer.spec_flags(name)
        shown = [Path(f).name if f.endswith(".gguf") else f for f in flags]
        self.model = peer.arm_model(name)
        target = (f" on {self.model.name}, the plain server on that file too"
                  if self.model != peer.model else "")
        self.note = (f"llama-server {' '.join(shown)}{target}; -np {SLOTS} -c {CONTEXT}; "
                     f"against the same binary and model without --spec-type")

    def judge(self) -> dict[str, Outcome]:
        peer = self.peer
        own_plain = None
        if self.model != peer.model:  # an arm with its own target gets its own reference
            own_plain = ServerProcess(peer.argv(model=self.model),
                                      name=f"llama-server (plain, {self.name})")
            try:
                own_plain.start()
            except ServerFailed as error:
                return {c: failed(f"the plain server on {self.model.name} did not start: "
                                  f"{error}") for c in CHECKS}
        try:
            return self._start(own_plain.url if own_plain else peer.plain.url)
        finally:
            if own_plain is not None:
                own_plain.stop()

    def _start(self, plain_url: str) -> dict[str, Outcome]:
        peer = self.peer
        spec = ServerProcess(peer.argv(*peer.spec_flags(self.name), model=self.model),
                             name=f"llama-server ({self.name})")
        try:
            spec.start()
        except ServerFailed as error:
            outcomes = {c: not_applicable("the speculative server did not start")
                        for c in CHECKS}
            outcomes["A1-drafted"] = failed(f"the server did not start with this "
                                            f"speculation: {error}")
            return outcomes
        try:
            return self._judge(spec, plain_url)
        except (ServerError, Unreachable) as error:  # outside any one check: counters
            return {c: failed(f"the speculative server answered {error}") for c in CHECKS}
        finally:
            spec.stop()

    def _judge(self, spec: ServerProcess, plain_url: str) -> dict[str, Outcome]:
        peer = self.peer
        served = OpenAIPeer(spec.url, plain_url, sampled=peer.sampled, delta=peer.delta,
                            only=tuple(c for c in peer.only if c in SERVED_CHECKS),
                            fields=FIELDS, knob_names=KNOB_NAMES)
        reason = served.unavailable()
        if reason is not None:
            return {c: failed(reason) for c in CHECKS}
        completions, chat = EndpointArm(served, "completions"), EndpointArm(served, "chat")
        start = counters(spec.url)
        # A1's own count first, request by request, of the answers that end at their budget:
        # there every draft has a target token to be held to (a draft past an end-of-turn
        # token, a stop or the context has none, and llama.cpp rightly does not accept it)
        clean = Metrics()
        for arm in (completions, chat):
            for prompt in arm.prompts:
                before = counters(spec.url)
                answer = arm.ask(arm.body(prompt))
                if answer["choices"][0].get("finish_reason") == "length":
                    clean = clean + (counters(spec.url) - before)
        outcomes = merge({"completions": completions.judge(), "chat": chat.judge()})
        own = {"I2-slot-reuse": lambda: slot_reuse(completions, chat),
               "I11-context": lambda: context_edge(completions, served)}
        for name, check in own.items():
            if name not in peer.only:
                outcomes[name] = not_applicable("not asked (--check)")
                continue
            try:
                outcomes[name] = check()
            except (ServerError, Unreachable) as error:
                outcomes[name] = failed(f"the server answered {error}")
            except (KeyError, IndexError, TypeError, ValueError) as error:
                outcomes[name] = failed(f"an answer not in the expected shape: "
                                        f"{type(error).__name__}: {error}")
        if not spec.running():
            crashed = f"the speculative server died during the checks:\n{spec.log(8)}"
            return {c: failed(crashed) if o.status != NOT_APPLICABLE else o
                    for c, o in outcomes.items()}
        if "A1-drafted" in peer.only:
            outcomes["A1-drafted"] = drafted(self.name, clean, counters(spec.url) - start)
        return {c: outcomes.get(c, not_applicable("not asked (--check)")) for c in CHECKS}


def merge(by_endpoint: dict[str, dict[str, Outcome]]) -> dict[str, Outcome]:
    """One outcome per check over both endpoints: failed where either failed (each failure
    named by its endpoint), passed where one passed and none failed."""
    merged = {}
    for check in SERVED_CHECKS:
        cells = {e: o[check] for e, o in by_endpoint.items() if check in o}
        bad = [f"{e}: {o.detail}" for e, o in cells.items() if o.status == FAILED]
        good = [f"{e}: {o.detail}" for e, o in cells.items() if o.status == "passed"]
        if bad:
            merged[check] = failed("; ".join(bad))
        elif good:
            merged[check] = passed("; ".join(good))
        else:
            merged[check] = next(iter(cells.values()), not_applicable("no endpoint ran it"))
    return merged


def drafted(arm: str, clean: Metrics, whole: Metrics) -> Outcome:
    """A1: the arm drafted (else its other checks held nothing), and a perfect draft had
    every draft accepted on the answers that end at their budget (`clean`; `whole` counts
    every request of the arm, drafts past an answer's end included)."""
    made, kept = int(whole.drafted), int(whole.accepted)
    if made == 0:
        return not_applicable("the server drafted nothing on these prompts: this arm's other "
                              "checks compared plain decode with itself")
    share = f"{kept}/{made} drafts accepted ({kept / made:.0%}) over the arm"
    c_made, c_kept = int(clean.drafted), int(clean.accepted)
    if arm == "draft-perfect":
        if c_made == 0:
            return failed(f"the target as its own draft drafted nothing on the I1 answers "
                          f"that end at their budget; {share}")
        if c_kept != c_made:
            return failed(f"the target as its own draft: {c_kept}/{c_made} drafts accepted "
                          f"on the I1 answers that end at their budget; every "
                          f"draft is the target's own greedy choice, so every one must be "
                          f"accepted ({share})")
        return passed(f"{c_kept}/{c_made} accepted on the I1 answers that end at their "
                      f"budget; {share}")
    return passed(share)


def slot_reuse(completions: EndpointArm, chat: EndpointArm) -> Outcome:
    """I2-slot-reuse: one slot (`id_slot`, `cache_prompt`, so its cache is reused), requests
    that each extend the last one and its answer: completions ending at their budget, then a
    conversation whose first answer ends its turn inside a drafted block (nothing accepted
    past that end may stay in the slot). Every answer equals plain's."""
    pin = {"id_slot": 0, "cache_prompt": True}
    prompt, turns = completions.prompts[0], 0
    for follow in ("", *FOLLOW_UPS):
        prompt += follow
        spec, plain = fresh_pair(completions, completions.body(prompt, **pin))
        turns += 1
        if (where := _diverges(spec, plain)) is not None:
            return failed(f"completions turn {turns}: {where}")
        prompt += _text(plain)
    messages = list(EOS_CHATS[0])
    for follow in ("", "Reply with only the word no."):
        if follow:
            messages += [{"role": "user", "content": follow}]
        body = {**chat.body("", max_tokens=EOS_BUDGET, **pin), "messages": messages}
        spec, plain = fresh_pair(chat, body)
        turns += 1
        if (where := _diverges(spec, plain)) is not None:
            return failed(f"chat turn {turns}: {where}")
        messages = messages + [{"role": "assistant", "content": _text(plain)}]
    return passed(f"{turns} requests on slot 0, each extending the last and its answer "
                  f"(the chat's first ends its turn)")


def fresh_pair(arm: EndpointArm, body: dict) -> tuple[dict, dict]:
    return arm.ask(body, fresh=True), arm.ask(body, plain=True, fresh=True)


def context_edge(completions: EndpointArm, served: OpenAIPeer) -> Outcome:
    """I11-context: for each edge in EDGES, a prompt of the slot's context less that many
    tokens, asked for more than fit: the speculative answer is plain's (ids, finish reason,
    or the same refusal), and prompt plus answer stay within the context."""
    listed = served.client.get("/v1/models")
    n_ctx = int(listed["data"][0]["meta"]["n_ctx"])
    unit = served.client.post("/tokenize", {"content": completions.prompts[0]})["tokens"]
    made = []
    for edge in EDGES:
        prompt = (unit * (n_ctx // max(1, len(unit)) + 1))[: n_ctx - edge]
        outcome = _edge_case(completions, prompt, n_ctx, edge)
        if isinstance(outcome, Outcome):
            return outcome
        made.append(outcome)
    return passed(f"prompts of the {n_ctx}-token slot less {', '.join(map(str, EDGES))} "
                  f"tokens: {made} tokens, each as plain")


def _edge_case(completions: EndpointArm, prompt: list[int], n_ctx: int,
               edge: int) -> Outcome | int:
    """One I11 prompt: the failure, else the number of tokens the (equal) answers hold (0
    where both refuse it with the same status)."""
    body = completions.body("", max_tokens=4 * edge)
    body["prompt"] = prompt
    try:
        spec = completions.ask(body, fresh=True)
    except ServerError as error:
        spec = error
    try:
        plain = completions.ask(body, plain=True, fresh=True)
    except ServerError as error:
        plain = error
    where = f"a {len(prompt)}-token prompt in a {n_ctx}-token slot (edge {edge})"
    if isinstance(plain, ServerError) or isinstance(spec, ServerError):
        if isinstance(plain, ServerError) and isinstance(spec, ServerError) \
                and plain.status == spec.status:
            return 0  # both refuse it alike: nothing generated on either
        return failed(f"{where}: speculative {describe(spec)}, plain {describe(plain)}")
    if (diverged := _diverges(spec, plain)) is not None:
        return failed(f"{where}: {diverged}")
    made = len(_ids(spec) or [])
    if len(prompt) + made > n_ctx:
        return failed(f"{len(prompt)} prompt tokens + {made} generated > the slot's {n_ctx}")
    finish = spec["choices"][0].get("finish_reason")
    if finish != plain["choices"][0].get("finish_reason"):
        return failed(f"{where}: finish_reason {finish!r} vs plain's "
                      f"{plain['choices'][0].get('finish_reason')!r}")
    return made


def describe(answer) -> str:
    if isinstance(answer, ServerError):
        return f"HTTP {answer.status}"
    return f"{len(_ids(answer) or [])} tokens, finish {answer['choices'][0].get('finish_reason')!r}"


__all__ = ["ARM_NAMES", "CHECKS", "DEFAULT_ARMS", "DFLASH_ARMS", "EAGLE3_ARMS", "MTP_ARMS",
           "LlamaServerPeer", "ServerArm"]
