import dataclasses

import pytest

from evaluation.concepts import load_concepts
from evaluation.models.generation import item_seed
from evaluation.models.registry import RegistryError, load_registry
from evaluation.pipeline.planning import (
    CPU_SECONDS_PER_IMAGE,
    CPU_SLOWDOWN,
    GPU_SECONDS_PER_IMAGE,
    UNKNOWN_MODEL_SECONDS,
    ConceptQuery,
    DeviceInfo,
    EvaluationRequest,
    cpu_warning,
    estimate_seconds,
    format_duration,
    parse_scales,
    plan_request,
    resolve_models,
    select_concepts,
)
from evaluation.pipeline.runs import check_run_name
from evaluation.pipeline.stages import MAX_RUN_IMAGES

CONCEPTS = load_concepts()


def test_select_concepts_applies_keys_category_type_and_search_in_that_order():
    keys = ("rotten apple", "apple", "banana", "lonely cabin")
    assert [c.key for c in select_concepts(CONCEPTS, ConceptQuery(keys=keys))] == list(keys)
    fruit = select_concepts(CONCEPTS, ConceptQuery(keys=keys, categories=("fruit",)))
    assert [c.key for c in fruit] == ["rotten apple", "apple", "banana"]
    originals = select_concepts(
        CONCEPTS, ConceptQuery(categories=("fruit",), modifier_types=("original",), search="APP")
    )
    assert [c.key for c in originals] == [
        c.key for c in CONCEPTS if c.category == "fruit" and c.modifier_type == "original" and "app" in c.key
    ]
    assert all(
        c.modifier_type == "emotional"
        for c in select_concepts(CONCEPTS, ConceptQuery(modifier_types=("emotional",)))
    )


def test_random_sample_is_reproducible_from_its_seed_and_keeps_list_order():
    query = ConceptQuery(categories=("animal",), sample_size=10, sample_seed=7)
    first, again = select_concepts(CONCEPTS, query), select_concepts(CONCEPTS, query)
    assert first == again and len(first) == 10 and len(set(first)) == 10
    animals = [c for c in CONCEPTS if c.category == "animal"]
    assert set(first) <= set(animals)
    assert [animals.index(c) for c in first] == sorted(animals.index(c) for c in first)
    other = select_concepts(CONCEPTS, ConceptQuery(categories=("animal",), sample_size=10, sample_seed=8))
    assert other != first
    assert len(select_concepts(CONCEPTS, ConceptQuery(keys=("apple",), sample_size=5))) == 1


@pytest.mark.parametrize(
    "query, message",
    [
        (ConceptQuery(keys=("no such thing",)), "`keys` names unknown concepts"),
        (ConceptQuery(categories=("furniture",)), "`categories` must be among"),
        (ConceptQuery(modifier_types=("funny",)), "`modifier_types` must be among"),
        (ConceptQuery(search="zzzz"), "no concept matches"),
        (ConceptQuery(sample_size=-1), "`sample_size` must be >= 0"),
    ],
)
def test_select_concepts_rejects_bad_queries_by_name(query, message):
    with pytest.raises(ValueError, match=message):
        select_concepts(CONCEPTS, query)


def test_plan_request_counts_models_concepts_styles_scales_and_seeds(tmp_path):
    request = EvaluationRequest(
        ("tiny-random", "sdxl"),
        ConceptQuery(keys=("apple", "rotten apple")),
        ("natural", "clipart"),
        cfg_scales=(7.5, 2.0),
        seeds=3,
    )
    items, config = plan_request(request, load_registry(), CONCEPTS)
    assert len(items) == 2 * 2 * 2 * 2 * 3
    assert config["models"]["tiny-random"]["cfg_scales"] == [2.0, 7.5]
    assert config["models"]["tiny-random"]["source"] == "models/tiny-random"  # the data folder's
    assert config["models"]["sdxl"]["source"] == "stabilityai/stable-diffusion-xl-base-1.0"
    assert all(
        i["seed"] == item_seed(i["model"], i["concept"], i["style"], i["cfg"], i["sample"]) for i in items
    )
    own = plan_request(
        EvaluationRequest(("sdxl",), ConceptQuery(keys=("apple",)), ("natural",), seeds=1),
        load_registry(),
        CONCEPTS,
    )[0]
    assert sorted(i["cfg"] for i in own) == list(load_registry()["sdxl"].cfg_scales)


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"models": ()}, ValueError, "`models` must name at least one"),
        ({"models": ("dall-e",)}, RegistryError, "unknown model"),
        ({"styles": ()}, ValueError, "`styles` must name at least one"),
        ({"styles": ("oil",)}, ValueError, "`styles` must be among"),
        ({"cfg_scales": (0.0,)}, ValueError, r"`cfg_scales` must be numbers in \(0, 100\], got \[0.0\]"),
        ({"cfg_scales": (float("inf"),)}, ValueError, r"`cfg_scales` must be numbers in \(0, 100\]"),
        ({"cfg_scales": (7.5, float("nan"))}, ValueError, r"`cfg_scales` must be numbers in \(0, 100\]"),
        (
            {"cfg_scales": (7.5, 1e308)},
            ValueError,
            r"`cfg_scales` must be numbers in \(0, 100\], got \[7.5, 1e\+308\]",
        ),
        ({"seeds": 0}, ValueError, "`seeds`"),
        # Built item by item, 10**12 seeds would hold the memory until the server is killed.
        (
            {"seeds": 10**12},
            ValueError,
            r"^the run would make 1,000,000,000,000 images \(1 model\(s\) x 1 concept-style pairs x 1 "
            r"guidance scale\(s\) x 1,000,000,000,000 seed\(s\)\); one run makes at most 1,000,000: lower",
        ),
    ],
)
def test_plan_request_rejects_bad_choices(tmp_path, changes, error, message):
    fields = {
        "models": ("tiny-random",),
        "query": ConceptQuery(keys=("apple",)),
        "styles": ("natural",),
        "cfg_scales": (7.5,),
        "seeds": 1,
    }
    with pytest.raises(error, match=message):
        plan_request(EvaluationRequest(**{**fields, **changes}), load_registry(), CONCEPTS)


def test_every_registry_model_over_the_papers_whole_grid_fits_in_one_run(tmp_path):
    registry = load_registry()
    models = tuple(key for key, spec in registry.items() if spec.build != "tiny")
    request = EvaluationRequest(models, ConceptQuery(), ("natural", "clipart"), seeds=5)
    items, _ = plan_request(request, registry, CONCEPTS)
    assert len(items) == sum(len(registry[m].cfg_scales) for m in models) * len(CONCEPTS) * 2 * 5
    assert len(items) == 7 * 7 * 1278 * 2 * 5 <= MAX_RUN_IMAGES
    with pytest.raises(ValueError, match="the run would make 1,252,440 images"):
        plan_request(dataclasses.replace(request, seeds=10), registry, CONCEPTS)


def test_resolve_models_leaves_hub_models_untouched(tmp_path):
    registry = load_registry()
    (sdxl,) = resolve_models(registry, ["sdxl"])
    assert sdxl == registry["sdxl"]
    (tiny,) = resolve_models(registry, ["tiny-random", "tiny-random"])
    assert tiny.source == "models/tiny-random"  # the data folder's, wherever it is (`tiny_in`)


def test_estimate_prefers_measured_seconds_then_device_defaults():
    items = [{"model": "sdxl"}] * 10 + [{"model": "tiny-random"}] * 4 + [{"model": "mystery"}]
    gpu = estimate_seconds(items, "cuda")
    assert gpu.per_model["sdxl"] == (10, GPU_SECONDS_PER_IMAGE["sdxl"], "default")
    assert gpu.per_model["mystery"] == (1, UNKNOWN_MODEL_SECONDS, "unknown model")
    assert gpu.seconds == pytest.approx(
        10 * GPU_SECONDS_PER_IMAGE["sdxl"] + 4 * GPU_SECONDS_PER_IMAGE["tiny-random"] + UNKNOWN_MODEL_SECONDS
    )
    cpu = estimate_seconds(items, "cpu", {"tiny-random": 2.0})
    assert cpu.per_model["sdxl"][1] == pytest.approx(GPU_SECONDS_PER_IMAGE["sdxl"] * CPU_SLOWDOWN)
    assert cpu.per_model["tiny-random"] == (4, 2.0, "measured")
    with pytest.raises(ValueError, match="`device_kind`"):
        estimate_seconds(items, "tpu")


def test_a_labs_own_tiny_model_is_estimated_and_warned_of_as_tiny_random_is():
    """An outside lab's copy of the tiny model under its own key was estimated at 50 min an
    image on a CPU and warned of as a full-size model; it ran in seconds."""
    registry = load_registry()
    ours = dataclasses.replace(registry["tiny-random"], key="our-lab-sd", build="")
    big = dataclasses.replace(ours, key="our-big-sd", params="0.9B", steps=30, resolution=512)
    specs = {**registry, ours.key: ours, big.key: big}
    items = [{"model": "our-lab-sd"}] * 3 + [{"model": "our-big-sd"}]
    cpu = estimate_seconds(items, "cpu", None, specs)
    assert cpu.per_model["our-lab-sd"] == (3, CPU_SECONDS_PER_IMAGE["tiny-random"], "as small as tiny-random")
    assert cpu.per_model["our-big-sd"] == (1, UNKNOWN_MODEL_SECONDS * CPU_SLOWDOWN, "unknown model")
    assert estimate_seconds(items, "cpu").per_model["our-lab-sd"][2] == "unknown model"  # no registry given
    cpu_device = DeviceInfo("cpu", "CPU")
    assert cpu_warning(cpu_device, ["our-lab-sd"], specs) == ""
    assert cpu_warning(cpu_device, ["our-lab-sd", "our-big-sd"], specs).startswith(
        "No GPU: our-big-sd would run"
    )
    unreadable = dataclasses.replace(ours, params="tiny")  # no number: no figures taken
    assert cpu_warning(cpu_device, ["our-lab-sd"], {"our-lab-sd": unreadable}).startswith(
        "No GPU: our-lab-sd"
    )


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "0 s"), (89, "89 s"), (600, "10 min"), (3600 * 3 + 1200, "3 h 20 min"), (86400 * 5, "5.0 days")],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_cpu_warning_names_the_full_size_models_only_on_a_cpu():
    cpu, gpu = DeviceInfo("cpu", "CPU"), DeviceInfo("cuda", "NVIDIA H100")
    assert cpu_warning(cpu, ["tiny-random", "sdxl", "flux-dev"]).startswith(
        "No GPU: sdxl, flux-dev would run"
    )
    assert cpu_warning(cpu, ["tiny-random"]) == "" and cpu_warning(gpu, ["sdxl"]) == ""
    assert gpu.kind == "cuda" and cpu.kind == "cpu"


@pytest.mark.parametrize("name", ["", "../up", "a/b", "a\\b", ".hidden", "x" * 81, "semi;colon"])
def test_run_names_that_are_not_plain_folder_names_are_refused(name):
    with pytest.raises(ValueError, match="`run` name"):
        check_run_name(name)


def test_parse_scales():
    assert parse_scales("3, 7.5;2") == (3.0, 7.5, 2.0) and parse_scales("") == () and parse_scales(None) == ()
    with pytest.raises(ValueError, match="`cfg_scales`"):
        parse_scales("3, high")
    for gap in ("7.5,,3", "7.5, ;3", "3,"):  # 7.5,,3 was taken as 7.5 and 3 (outside probe 234)
        with pytest.raises(ValueError, match="`cfg_scales` must be comma-separated numbers"):
            parse_scales(gap)
    assert parse_scales("  ") == ()
    for foreign in ("\u0661\u0662", "7, \uff17.\uff15", "1_0"):  # read as 12, 7.5 and 10 (outside probe 214)
        with pytest.raises(ValueError, match="`cfg_scales` must be comma-separated numbers"):
            parse_scales(foreign)


def test_measured_seconds_are_a_median_without_each_runs_first_image(db):
    """The first image of a run paid for warming the fresh model up: a try-out of three images
    whose first took 7.8 s must not make a 9,000-image estimate of 7.8 s per image."""
    from evaluation.pipeline import runs
    from evaluation.pipeline.planning import measured_seconds

    def store(run, model, seconds):
        items = [
            {"model": model, "concept": "apple", "noun": "apple", "style": "natural", "cfg": 7.5}
            | {"sample": i, "seed": i, "prompt": "an apple"}
            for i in range(len(seconds))
        ]
        runs.create_run(db, run, items, {"test": run})
        runs.record_items(
            db,
            [
                {"id": item["id"], "status": "generated", "gen_seconds": s - 0.25, "seg_seconds": 0.25}
                for item, s in zip(runs.items(db, run), seconds)
            ],
        )

    assert measured_seconds(db) == {}
    store("try", "tiny-random", [7.8, 0.4, 0.5])
    store("again", "tiny-random", [6.0, 0.3, 0.6, 0.45])
    store("one", "tiny-random-b", [0.9])
    measured = measured_seconds(db)
    assert measured == {"tiny-random": pytest.approx(0.45), "tiny-random-b": pytest.approx(0.9)}
    estimate = estimate_seconds([{"model": "tiny-random"}] * 9000, "cpu", measured)
    assert estimate.seconds == pytest.approx(9000 * 0.45)


def test_the_second_tiny_model_is_registered_with_other_weights_and_planned_like_the_first(tmp_path):
    registry = load_registry()
    first, second = registry["tiny-random"], registry["tiny-random-b"]
    assert (second.build, second.build_seed, first.build_seed) == ("tiny", 1, 0)
    assert (second.resolution, second.steps, second.cfg_scales) == (
        first.resolution,
        first.steps,
        first.cfg_scales,
    )
    assert cpu_warning(DeviceInfo("cpu", "CPU"), ["tiny-random", "tiny-random-b"]) == ""
    cpu = estimate_seconds([{"model": "tiny-random-b"}] * 4, "cpu")
    assert cpu.per_model["tiny-random-b"] == (4, 0.35, "default")
    (spec,) = resolve_models(registry, ["tiny-random-b"])
    assert spec.source == "models/tiny-random-b"


def test_explicit_runs_are_estimated_per_object_and_left_out_of_concept_run_figures(db):
    """An explicit image is generated once and scored per object (the outside tester's plan
    said 0.35 s an image; scoring took seconds per image): generation per model and scoring
    per object are measured in explicit runs, without each run's first image, and concept
    runs' figures ignore explicit runs."""
    from evaluation.explicit.mode import create_explicit_run, plan_explicit_run, plan_summary
    from evaluation.explicit.prompts import build_prompts
    from evaluation.pipeline import runs
    from evaluation.pipeline.planning import (
        CPU_SECONDS_PER_OBJECT,
        GPU_SECONDS_PER_OBJECT,
        ExplicitSeconds,
        explicit_seconds,
        measured_seconds,
    )

    registry = load_registry()

    def spec(key):
        return dataclasses.replace(registry[key], cfg_scales=(7.5,))

    def record(run, times):
        """`times`: (gen_seconds, seg_seconds) of the run's items in id order."""
        ids = sorted(item["id"] for item in runs.items(db, run))
        assert len(ids) == len(times)
        runs.record_items(
            db,
            [
                {"id": i, "status": "generated", "gen_seconds": gen, "seg_seconds": seg}
                for i, (gen, seg) in zip(ids, times)
            ],
        )

    prompts = build_prompts(
        tasks=["color_name", "multi_object"], systems=["iscc-nbs-l1"], colors=["red"], objects=["car"], size=1
    )
    one, two = sorted(prompts, key=lambda p: len(p.objects))
    assert (len(one.objects), len(two.objects)) == (1, 2)

    assert measured_seconds(db) == {}
    assert explicit_seconds(db) == ExplicitSeconds({}, None)
    # Nothing measured: the device's defaults, generation from the concept runs' table.
    items, _ = plan_explicit_run([spec("tiny-random")], [one, two], 2, {})
    plan = plan_summary(items, [one, two], "cpu", measured_seconds(db), registry, explicit_seconds(db))
    assert (plan.images, plan.objects, plan.scoring) == (4, 6, (CPU_SECONDS_PER_OBJECT, "default"))
    assert plan.estimate.per_model == {"tiny-random": (4, CPU_SECONDS_PER_IMAGE["tiny-random"], "default")}
    assert plan.seconds == pytest.approx(
        4 * CPU_SECONDS_PER_IMAGE["tiny-random"] + 6 * CPU_SECONDS_PER_OBJECT
    )
    on_gpu = plan_summary(items, [one, two], "cuda", explicit=explicit_seconds(db))
    assert on_gpu.seconds == pytest.approx(
        4 * GPU_SECONDS_PER_IMAGE["tiny-random"] + 6 * GPU_SECONDS_PER_OBJECT
    )

    # A concept run of tiny-random: (gen, seg) per image, the first one warming up.
    concept_items = [
        {"model": "tiny-random", "concept": "apple", "noun": "apple", "style": "natural", "cfg": 7.5}
        | {"sample": i, "seed": i, "prompt": "an apple"}
        for i in range(3)
    ]
    runs.create_run(db, "concept", concept_items, {"test": "concept"})
    record("concept", [(7.0, 0.5), (0.3, 0.1), (0.5, 0.2)])  # 0.4 and 0.7 -> 0.55
    # Explicit run "x": tiny-random-b, the one-object prompt then the two-object one, 3 images each.
    create_explicit_run(db, "x", [spec("tiny-random-b")], [one, two], samples=3, settings={})
    record(
        "x",
        [(9.0, 20.0), (1.0, 1.5), (2.0, 2.5), (3.0, 4.0), (4.0, 6.0), (5.0, 10.0)],
    )  # generation 1..5 -> 3.0; per object 1.5, 2.5, 2.0, 3.0, 5.0
    # Explicit run "y": sdxl, the one-object prompt, 2 images.
    create_explicit_run(db, "y", [spec("sdxl")], [one], samples=2, settings={})
    record("y", [(7.0, 30.0), (0.5, 2.0)])  # generation 0.5; per object 2.0

    assert measured_seconds(db) == {"tiny-random": pytest.approx(0.55)}
    measured = explicit_seconds(db)
    assert measured.generation == {"tiny-random-b": pytest.approx(3.0), "sdxl": pytest.approx(0.5)}
    # Pooled over models: 1.5, 2.0, 2.0, 2.5, 3.0, 5.0.
    assert measured.per_object == pytest.approx(2.25)

    models = [spec("tiny-random"), spec("tiny-random-b"), spec("sdxl")]
    items, _ = plan_explicit_run(models, [one, two], 2, {})
    plan = plan_summary(items, [one, two], "cuda", measured_seconds(db), registry, measured)
    assert (plan.images, plan.objects) == (12, 18)
    assert plan.estimate.per_model == {
        "tiny-random": (4, pytest.approx(0.55), "measured in concept runs"),
        "tiny-random-b": (4, pytest.approx(3.0), "measured"),
        "sdxl": (4, pytest.approx(0.5), "measured"),
    }
    assert plan.scoring == (pytest.approx(2.25), "measured")
    assert plan.estimate.seconds == pytest.approx(4 * 0.55 + 4 * 3.0 + 4 * 0.5)
    assert plan.seconds == pytest.approx(4 * 0.55 + 4 * 3.0 + 4 * 0.5 + 18 * 2.25)  # 56.7
