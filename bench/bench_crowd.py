"""Crowd scale: many participants open one study link within a minute and vote at a human pace.

``python -m bench.bench_crowd [--participants 200] [--join-s 60] [--vote-s 120]
[--server-cpus 0,1] [--client-processes 6]`` (also ``python -m bench --only crowd``);
``--participants 25,50,100,200`` runs a sweep, one size after the other, each on a fresh
database and app process; ``--server-cpus`` pins the app to those CPUs and the clients to
the others (the issue's "one machine with two cores" measured without the clients' own CPU). One app process (`bench.app_process.AppProcess`) on a
synthetic open study (`tests`-free: `prepare` builds it with the engine's own
bookkeeping); `participants` light clients (threads speaking Gradio's queue protocol over
keep-alive, `bench.designer_client.HttpClient`) each:

1. load the page: ``GET /?study=TOKEN&PROLIFIC_PID=...`` (the HTML carries the page
   config) and the page-load event that joins the study (``start_restore``, sent with the
   page's query string as the browser does), at a uniformly drawn moment in the first
   `join_s` seconds;
2. agree to the consent text (``participant_consent``), then answer the background
   question (which shows the first trial);
3. vote left or right every 3-8 s (uniform) until `vote_s` seconds after the start.

Measured: page load (1) and vote latency (request to answer) percentiles; the votes
acknowledged against those stored (`vote_problems`: none lost, none duplicated, each
pair's count exact, no participant twice on a pair, none over its votes per pair); the
1-minute load average at start, its highest sample during the run, and at the end.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime as dt
import json
import multiprocessing
import os
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from annotation.people.accounts import Actor
from annotation.study import crowd
from annotation.study import design as study
from bench.app_process import AppProcess, affinity, page_config
from bench.designer_client import CLIENT_TIMEOUT_S, HttpClient
from evaluation.pipeline import runs
from storage import ensure_schema, open_db

ADMIN = Actor(None, "admin", frozenset({"admin"}))
MODELS = ("m1", "m2", "m3")
RUN, STYLE, CFG = "crowd-run", "clipart", 4.5
PACE_S = (3.0, 8.0)
KEEPALIVE_S = 2.0
ELEM_IDS = {"task": "participant_task", "shown_at": "participant_shown_at", "url": "participant_return_url"}


@dataclass
class Outcome:
    """One client's record: `page_s` (page load incl. the join), vote latencies, the
    tasks it voted on that the server acknowledged, and errors."""

    page_s: float | None = None
    html_s: float | None = None
    vote_s: list[float] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def prepare(db_path: Path, data_dir: Path, participants: int, trials: int, *, seed: int = 0) -> str:
    """An open study with pairs enough for every participant's `trials` (6 votes a pair) and
    an open link for `participants` from one address; returns the link's token."""
    rng = np.random.default_rng(seed)
    db = open_db(db_path)
    try:
        ensure_schema(db)
        from annotation.concepts import sync_concepts
        from evaluation.concepts import load_concepts

        sync_concepts(db)
        n_concepts = min(1200, int(np.ceil(participants * trials / 6 / len(MODELS) * 1.2)) + 5)
        keys = [c.key for c in load_concepts()][:n_concepts]
        truths = {k: rng.dirichlet(np.ones(71)) for k in keys}
        items = [
            {
                "model": m,
                "concept": k,
                "noun": k,
                "style": STYLE,
                "cfg": CFG,
                "sample": 0,
                "seed": 0,
                "prompt": k,
            }
            for m in MODELS
            for k in keys
        ]
        runs.create_run(db, RUN, items, {"models": list(MODELS)})
        runs.record_items(
            db, [{"id": i["id"], "status": "segmented", "segment_status": "ok"} for i in runs.items(db, RUN)]
        )
        for m in MODELS:
            for k in keys:
                runs.store_model_distribution(db, RUN, m, k, STYLE, CFG, rng.dirichlet(np.ones(71)), 1, 0)
        truth = study.GroundTruthSource(
            "synthetic", lambda _db, key: study.GroundTruth(truths[key], 0, (), ()) if key in truths else None
        )
        sources = [study.ModelSource(m, RUN, CFG) for m in MODELS]
        study_id = study.create_study(
            db, "crowd", sources, truth, seed=seed, n_concepts=len(keys), trials_per_participant=trials
        )
        study.open_study(db, study_id, ADMIN)
        _, token = crowd.create_link(
            db,
            study_id,
            ADMIN,
            quota=participants,
            minutes=120,
            completion_code="BENCHDONE",
            screenout_code="BENCHOUT",
            max_failed_checks=1000,
            joins_per_address=participants,
        )
        return token
    finally:
        db.close()


class PageClient(HttpClient):
    """`HttpClient` that also loads the page and runs a page event by index with the
    page's query string (as Gradio's page sends it), returning every output.

    Idle connections are dropped after `KEEPALIVE_S`, before the server's keep-alive
    timeout (uvicorn's 5 s) closes them: between votes 3-8 s apart, reusing a connection
    the server was closing reset it ("Connection reset by peer", 3 of 761 votes at 50).
    """

    def __init__(self, url: str):
        super().__init__(url)
        self._http.close()
        self._http = httpx.Client(timeout=CLIENT_TIMEOUT_S, limits=httpx.Limits(keepalive_expiry=KEEPALIVE_S))

    def page(self, query: str) -> None:
        self._http.get(f"{self.url}?{query}").raise_for_status()

    def event(self, fn_index: int, data: list, query: str = "") -> list:
        body = {"data": data, "fn_index": fn_index, "session_hash": self.session_hash}
        joined = (
            self._http.post(f"{self.url}gradio_api/queue/join?{query}", json=body).raise_for_status().json()
        )
        completed = self._completed(joined["event_id"])
        if not completed.get("success"):
            raise RuntimeError(str(completed["output"].get("error"))[:200])
        return completed["output"]["data"]


def page_events(url: str) -> dict:
    """Indices of the events a participant's page runs and the output positions read."""
    elem = {
        c["id"]: c["props"].get("elem_id") for c in page_config(url, timeout=CLIENT_TIMEOUT_S)["components"]
    }
    events = httpx.get(f"{url}config", timeout=CLIENT_TIMEOUT_S).raise_for_status().json()["dependencies"]
    deps = {d.get("api_name"): (i, d) for i, d in enumerate(events) if d.get("api_name")}
    vote_index, vote = deps["participant_vote"]
    positions = {name: [elem[o] for o in vote["outputs"]].index(eid) for name, eid in ELEM_IDS.items()}
    return {
        "restore": deps["start_restore"][0],
        "consent": deps["participant_consent"][0],
        "background": deps["participant_set_background"][0],
        "vote": vote_index,
        "positions": positions,
    }


def participant(
    url: str, token: str, pid: str, events: dict, start: float, until: float, seed: int
) -> Outcome:
    """One crowd participant (module docstring); never raises."""
    rng = np.random.default_rng(seed)
    outcome = Outcome()
    query = urllib.parse.urlencode(
        {"study": token, "PROLIFIC_PID": pid, "STUDY_ID": "bench", "SESSION_ID": pid}
    )
    at = events["positions"]
    stage = "page load"
    try:
        time.sleep(max(0.0, start - time.perf_counter()))
        began = time.perf_counter()
        client = PageClient(url)
        client.page(query)
        outcome.html_s = time.perf_counter() - began
        session = client.event(events["restore"], [""], query)[0]
        outcome.page_s = time.perf_counter() - began
        if not session:
            raise RuntimeError("the study link signed nobody in")
        stage = "consent"
        client.event(events["consent"], [session, True])
        stage = "background"
        view = client.event(events["background"], [session, "no"])
        stage = "vote"
        while time.perf_counter() < until and view[at["task"]] not in (None, ""):
            time.sleep(rng.uniform(*PACE_S))
            task = int(view[at["task"]])
            sent = time.perf_counter()
            view = client.event(
                events["vote"], [session, task, str(rng.choice(["left", "right"])), view[at["shown_at"]]]
            )
            outcome.vote_s.append(time.perf_counter() - sent)
            outcome.acked.append(task)
        client.close()
    except Exception as error:  # noqa: BLE001 (a client's failure is a result)
        outcome.errors.append(f"{pid} at {stage}: {type(error).__name__}: {error}"[:300])
    return outcome


def vote_problems(db_path: Path, acked: list[int]) -> list[str]:
    """What is wrong with the stored votes given the acknowledged tasks (empty: all well)."""
    db = open_db(db_path)
    try:
        problems = []
        stored = {
            r["task"]: r
            for r in db.query(
                "select t.id as task, t.pair_id, t.annotator_id, j.participant_id, j.pair_id as voted_pair "
                "from tasks t join judgments j on j.id = t.result_id where t.kind = 'judgment' and t.status = 'submitted'"
            )
        }
        problems += [f"acknowledged vote on task {t} is not stored" for t in acked if t not in stored]
        repeats = [t for t, n in Counter(acked).items() if n > 1]
        problems += [f"task {t} acknowledged twice" for t in repeats]
        n_judgments = db["judgments"].count
        if n_judgments != len(set(acked)):
            problems.append(f"{n_judgments} votes stored, {len(set(acked))} acknowledged")
        problems += [
            f"task {t}: its judgment is another person's or pair's"
            for t, r in stored.items()
            if (r["participant_id"], r["voted_pair"]) != (r["annotator_id"], r["pair_id"])
        ]
        twice = db.execute(
            "select count(*) from (select 1 from judgments group by pair_id, participant_id having count(*) > 1)"
        ).fetchone()[0]
        problems += [f"{twice} (pair, participant) judged twice"] if twice else []
        per_pair = Counter(stored[t]["pair_id"] for t in set(acked) if t in stored)
        counts = dict(db.execute("select pair_id, count(*) from judgments group by pair_id").fetchall())
        problems += [
            f"pair {p}: {n} votes stored, {per_pair.get(p, 0)} acknowledged"
            for p, n in counts.items()
            if n != per_pair.get(p, 0)
        ]
        over = db.execute(
            "select count(*) from (select j.pair_id from judgments j join study_pairs p on p.id = j.pair_id "
            "join studies s on s.id = p.study_id group by j.pair_id having count(*) > max(s.votes_per_pair))"
        ).fetchone()[0]
        problems += [f"{over} pairs over their votes per pair"] if over else []
        return problems
    finally:
        db.close()


def _group(url: str, token: str, events: dict, jobs: list[tuple[int, float]], until: float) -> list[Outcome]:
    """Participants ``(i, moment)`` of one client process, each in a thread; their outcomes
    in the order of `jobs`. `moment` and `until` are `time.perf_counter` values (the system's
    monotonic clock, the same in every process)."""
    outcomes: list[Outcome] = [Outcome() for _ in jobs]

    def one(k: int) -> None:
        i, moment = jobs[k]
        outcomes[k] = participant(url, token, f"pid{i:04d}", events, moment, until, 100 + i)

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _pin(cpus: list[int] | None) -> None:
    """A client process's CPUs (Linux affinity); None keeps them."""
    if cpus:
        os.sched_setaffinity(0, cpus)


def _ready(_: int = 0) -> int:
    """Nothing: a task that makes a client process start and import this module."""
    time.sleep(0.5)
    return os.getpid()


def run(
    participants: int = 200,
    join_s: float = 60.0,
    vote_s: float = 120.0,
    *,
    folder: Path | None = None,
    server_cpus: list[int] | None = None,
    client_processes: int = 1,
) -> dict:
    """Run the scenario (module docstring); returns its figures.

    `server_cpus` pins the app (and what it starts) to those CPUs and the clients to the
    others; `client_processes` > 1 spreads the clients' threads over that many processes
    (started and ready before the clock), so that one interpreter's lock does not time the
    clients instead of the server.
    """
    folder = Path(tempfile.mkdtemp(prefix="bench-crowd-")) if folder is None else folder
    db_path, data_dir = folder / "crowd.sqlite", folder / "data"
    trials = int(vote_s / PACE_S[0]) + 5
    token = prepare(db_path, data_dir, participants, trials)
    loads = [os.getloadavg()[0]]
    client_cpus = None if server_cpus is None else sorted(os.sched_getaffinity(0) - set(server_cpus))
    with contextlib.ExitStack() as stack:
        app = stack.enter_context(
            AppProcess(db_path, data_dir, log_path=folder / "app.log", cpus=server_cpus)
        )
        stack.enter_context(affinity(client_cpus))
        if client_processes > 1:
            clients = stack.enter_context(
                ProcessPoolExecutor(
                    client_processes,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_pin,
                    initargs=(client_cpus,),
                )
            )
            list(clients.map(_ready, range(client_processes)))  # every process started and imported
        else:
            clients = stack.enter_context(ThreadPoolExecutor(1))
        events = page_events(app.url)
        rng = np.random.default_rng(1)
        start = time.perf_counter() + 1.0
        until = start + vote_s
        moments = start + np.sort(rng.uniform(0, join_s, participants))
        jobs = [(i, float(moments[i])) for i in range(participants)]
        groups = [jobs[k::client_processes] for k in range(client_processes)]
        futures = [clients.submit(_group, app.url, token, events, group, until) for group in groups]
        while not all(f.done() for f in futures):
            loads.append(os.getloadavg()[0])
            concurrent.futures.wait(futures, timeout=5.0)
        outcomes: list[Outcome] = [Outcome() for _ in range(participants)]
        for group, future in zip(groups, futures):
            for (i, _), outcome in zip(group, future.result()):
                outcomes[i] = outcome
        loads.append(os.getloadavg()[0])
    acked = [t for o in outcomes for t in o.acked]
    pages = [o.page_s for o in outcomes if o.page_s is not None]
    htmls = [o.html_s for o in outcomes if o.html_s is not None]
    votes = [v for o in outcomes for v in o.vote_s]
    errors = [e for o in outcomes for e in o.errors]
    return {
        "participants": participants,
        "joined": len(pages),
        "join_s": join_s,
        "vote_s": vote_s,
        "page_p50_s": float(np.percentile(pages, 50)) if pages else None,
        "page_p95_s": float(np.percentile(pages, 95)) if pages else None,
        "html_p50_s": float(np.percentile(htmls, 50)) if htmls else None,
        "html_p95_s": float(np.percentile(htmls, 95)) if htmls else None,
        "votes": len(votes),
        "vote_p50_ms": float(np.percentile(votes, 50) * 1000) if votes else None,
        "vote_p95_ms": float(np.percentile(votes, 95) * 1000) if votes else None,
        "problems": vote_problems(db_path, acked),
        "errors": errors[:10],
        "n_errors": len(errors),
        "load_start": loads[0],
        "load_max": max(loads),
        "load_end": os.getloadavg()[0],
        "server_cpus": server_cpus,
        "client_processes": client_processes,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def markdown(f: dict) -> str:
    """One table row of a run for BENCHMARKS.md."""

    def num(v, fmt):
        return "–" if v is None else format(v, fmt)

    return (
        f"| {f['participants']} | {f['joined']} | {num(f['page_p50_s'], '.2f')} / {num(f['page_p95_s'], '.2f')} s "
        f"({num(f['html_p50_s'], '.2f')} / {num(f['html_p95_s'], '.2f')} s) | "
        f"{f['votes']} | {num(f['vote_p50_ms'], '.0f')} / {num(f['vote_p95_ms'], '.0f')} ms | "
        f"{len(f['problems'])} | {f['n_errors']} | {f['load_start']:.1f} / {f['load_max']:.1f} / {f['load_end']:.1f} |"
    )


def main(argv: list[str] | None = None) -> None:
    """Run the crowd benchmark and print its figures as JSON and a table row."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_crowd", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--participants", type=_sizes, default=[200], help="one size, or a sweep: 25,50,100,200"
    )
    parser.add_argument("--join-s", type=float, default=60.0)
    parser.add_argument("--vote-s", type=float, default=120.0)
    parser.add_argument(
        "--server-cpus",
        type=_cpus,
        default=None,
        help="CPUs the app runs on (e.g. 0,1); the clients then run on the others",
    )
    parser.add_argument(
        "--client-processes", type=int, default=1, help="processes the clients' threads are spread over"
    )
    args = parser.parse_args(argv)
    if args.client_processes < 1:
        parser.error(f"--client-processes must be a whole number >= 1, got {args.client_processes}")
    done = []
    for size in args.participants:
        figures = run(
            size,
            args.join_s,
            args.vote_s,
            server_cpus=args.server_cpus,
            client_processes=args.client_processes,
        )
        figures["meets_targets"] = meets_targets(figures)
        print(json.dumps(figures, indent=2), flush=True)
        print(markdown(figures), flush=True)
        done.append(figures)
    if len(done) > 1:
        held = [f["participants"] for f in done if f["meets_targets"]]
        print(HEADER)
        print("\n".join(markdown(f) for f in done))
        print(f"largest size that meets every target: {max(held) if held else 'none'}")


def _sizes(text: str) -> list[int]:
    """``"25,50,100"`` as ``[25, 50, 100]`` (each a whole number from 1 to 10,000)."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"sizes must be whole numbers separated by commas, got {text!r}"
        ) from None
    if not sizes or not all(1 <= n <= 10_000 for n in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be whole numbers from 1 to 10000, got {text!r}")
    return sizes


def _cpus(text: str) -> list[int]:
    """``"0,1"`` as ``[0, 1]``: CPUs this process may use, at least one left for the clients."""
    try:
        cpus = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--server-cpus must be CPU numbers separated by commas, got {text!r}"
        ) from None
    allowed = os.sched_getaffinity(0)
    if not cpus or not set(cpus) < allowed:
        raise argparse.ArgumentTypeError(
            f"--server-cpus must name some, not all, of this process's CPUs {sorted(allowed)}, got {text!r}"
        )
    return cpus


TARGETS = {"page_p95_s": 2.0, "vote_p95_ms": 300.0}


def meets_targets(figures: dict) -> bool:
    """Whether a run meets the issue's targets: every client joined, page load p95 < 2 s,
    vote p95 < 300 ms, no store problem and no client error."""
    return (
        figures["joined"] == figures["participants"]
        and not figures["problems"]
        and figures["n_errors"] == 0
        and all(figures[key] is not None and figures[key] < limit for key, limit in TARGETS.items())
    )


HEADER = (
    "| participants | joined | page load p50 / p95 (HTML p50 / p95) | votes acknowledged | vote p50 / p95 "
    "| store problems | client errors | load average |\n|---:|---:|---:|---:|---:|---:|---:|---|"
)


def _where(f: dict) -> str:
    """Where the clients and the app ran, as a sentence."""
    processes = f.get("client_processes", 1)
    clients = "one process" if processes == 1 else f"{processes} processes"
    if f.get("server_cpus"):
        return f"the app pinned to CPUs {','.join(map(str, f['server_cpus']))}, light clients in threads of {clients} on the other CPUs."
    return f"light clients in threads of {clients} on the same CPUs as the app."


def section(figures: list[dict], command: str) -> str:
    """The "Crowd" section of BENCHMARKS.md: how it was run, then a row per run."""
    f = figures[0]
    return (
        f"Command: `{command}`; {f['date']}; each run: the participants open the link within "
        f"{f['join_s']:.0f} s and vote every 3-8 s until {f['vote_s']:.0f} s after the start; "
        + _where(f)
        + " Targets: page "
        "load p95 < 2 s, vote p95 < 300 ms, no store problem.\n\n"
        + HEADER
        + "\n"
        + "\n".join(markdown(f) for f in figures)
    )


if __name__ == "__main__":
    main()
