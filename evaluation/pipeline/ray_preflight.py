"""Before a run's first batch on Ray: does every node see the data folder and have the weights?

A run on several machines needs one shared data folder mounted at the same path on every
node, and the model weights on every node (docs/scale-out.md). Neither shows until a worker
on the wrong node reaches the stage that needs it, maybe days into a run. `preflight` asks
each alive node, with a task pinned to it, to write a probe file into the data folder and
to look for the weights; the head then reads every probe back. A node whose probe does
not reach the head, that cannot write, that lacks weights or that does not answer is
named in one `PreflightFailed` line. A node that Ray still lists but places no task on (its
raylet has just died: Ray notices some seconds later) is left out, with a line on stderr.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaluation.pipeline.ray_storage import Location, is_uri, read_file, write_file

#: Seconds every node has to answer the preflight (a node loads Python and the project first).
PREFLIGHT_TIMEOUT_S = 120.0
PROBES = ".preflight"


class PreflightFailed(ValueError):
    """A node of the Ray cluster cannot take part in the run; the message names it and why."""


def _probe(folder: Location, relative: str, token: str, weights: tuple) -> dict:
    """On one node: write the probe file and look for the weights (`weights`: the plain
    values of `evaluation.pipeline.jobs.weights_request`, so that the probe does not import
    the pipeline: 2.8 against 1.0 CPU-s on a slow 2-core VM); never raises."""
    import os

    import ray

    from evaluation.models.availability import weights_refusal

    answer = {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address()}
    try:
        write_file(folder, relative, token.encode())
        answer["write"] = ""
    except OSError as exc:
        answer["write"] = f"{type(exc).__name__}: {exc}"
    try:
        answer["weights"] = weights_refusal(*weights)
    except ValueError as exc:  # a model entry the registry refuses
        answer["weights"] = str(exc)
    answer["pid"] = os.getpid()
    return answer


def preflight(
    data_dir: Location,
    config: Mapping[str, Any] | None = None,
    segmenter=None,
    *,
    timeout_s: float = PREFLIGHT_TIMEOUT_S,
) -> list[str]:
    """Check every alive node of the connected Ray cluster before a run's first batch.

    Parameters
    ----------
    data_dir : str or Path
        The run folder (a path shared by all nodes, or an object-store URI).
    config : mapping, optional
        The run's configuration (its models' weights are looked for); None: no generation.
    segmenter : evaluation.pipeline.jobs.SegmenterSpec, optional
        The masking models looked for; None: no masking.
    timeout_s : float
        Seconds the nodes have to answer.

    Returns
    -------
    list of str
        The nodes checked, as `evaluation.pipeline.ray_executor.describe_node` names them
        (without those left out as gone).

    Raises
    ------
    PreflightFailed
        Naming each node that does not see the folder, cannot write it, lacks weights or
        did not answer within `timeout_s`.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from evaluation.pipeline.jobs import weights_request
    from evaluation.pipeline.ray_executor import describe_node

    if timeout_s <= 0:
        raise ValueError(f"`timeout_s` must be positive, got {timeout_s}")
    if not is_uri(data_dir):
        data_dir = Path(data_dir).resolve()
    token = secrets.token_hex(8)
    weights = weights_request(config, segmenter)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    probe = ray.remote(num_cpus=0, max_retries=0)(_probe)
    calls = {
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            data_dir, f"{PROBES}/{token}/{n['NodeID']}", token, weights
        ): n
        for n in nodes
    }
    done, late = ray.wait(list(calls), num_returns=len(calls), timeout=timeout_s)
    problems, gone = [], []
    try:
        for ref in late:
            ray.cancel(ref, force=True)
            node = calls[ref]
            problems.append(
                f"{describe_node(node['NodeID'], node['NodeManagerAddress'])} did not answer within {timeout_s:g} s"
            )
        for ref in done:
            node = calls[ref]
            where = describe_node(node["NodeID"], node["NodeManagerAddress"])
            try:
                answer = ray.get(ref)
            except ray.exceptions.TaskUnschedulableError:
                # Ray lists a node whose raylet has died as alive for some seconds more, but no
                # task is placed on it, so no worker of the run would be either.
                gone.append(node)
                print(
                    f"Ray: {where} is listed but takes no tasks (it has just died or is leaving); "
                    "the run goes on without it",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            except ray.exceptions.RayError as exc:
                problems.append(f"{where} failed the check ({type(exc).__name__})")
                continue
            if answer["write"]:
                problems.append(
                    f"{where} cannot write to the data folder {str(data_dir)!r} ({answer['write']})"
                )
            elif not _reads_back(data_dir, f"{PROBES}/{token}/{answer['node_id']}", token):
                problems.append(
                    f"{where} does not see the data folder {str(data_dir)!r} (its probe file did not reach the "
                    "head: mount one shared folder at the same path on every node)"
                )
            if answer["weights"]:
                problems.append(f"{where} lacks weights: {answer['weights']}")
    finally:
        _remove_probes(data_dir, token)
    if problems:
        raise PreflightFailed("the run was not started on Ray: " + "; ".join(problems))
    return [describe_node(n["NodeID"], n["NodeManagerAddress"]) for n in nodes if n not in gone]


def _reads_back(data_dir: Location, relative: str, token: str) -> bool:
    try:
        return read_file(data_dir, relative) == token.encode()
    except (OSError, FileNotFoundError):
        return False


def _remove_probes(data_dir: Location, token: str) -> None:
    if not is_uri(data_dir):
        shutil.rmtree(Path(data_dir) / PROBES / token, ignore_errors=True)
        with contextlib.suppress(OSError):
            (Path(data_dir) / PROBES).rmdir()
        return
    from evaluation.pipeline.ray_storage import _filesystem

    filesystem, root = _filesystem(data_dir)
    with contextlib.suppress(OSError):
        filesystem.delete_dir(f"{root.rstrip('/')}/{PROBES}/{token}")
