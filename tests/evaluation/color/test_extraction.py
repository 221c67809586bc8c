import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from evaluation.color.colorspace import delta_e_2000, srgb_to_lab
from evaluation.color.extraction import (
    concept_distribution,
    distribution_from_pixels,
    dominant_color,
    group_images,
    image_distribution,
    image_pixels,
    merge_colors,
)
from evaluation.color.palette import load_uw71, nearest_uw71

BACKGROUND = (250, 250, 245)
RED, RED_SHINE = (200, 30, 40), (230, 80, 80)
GREEN, GREEN_SHINE = (70, 160, 50), (120, 200, 90)


def _apple(body, shine, rng, shape=(120, 160)):
    """A round 'apple' with a highlight and ±4 pixel noise on a light background."""
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    mask = (yy - 60) ** 2 + (xx - 80) ** 2 < 50**2
    image = np.full(shape + (3,), BACKGROUND, dtype=np.uint8)
    image[mask] = body
    image[mask & ((yy - 45) ** 2 + (xx - 65) ** 2 < 15**2)] = shine
    noisy = image.astype(int) + rng.integers(-4, 5, size=image.shape)
    image = np.where(mask[..., None], np.clip(noisy, 0, 255), image).astype(np.uint8)
    return image, mask


def _apples(seed=0):
    rng = np.random.default_rng(seed)
    pairs = [_apple(RED, RED_SHINE, rng) for _ in range(4)]
    pairs += [_apple(GREEN, GREEN_SHINE, rng) for _ in range(2)]
    return [im for im, _ in pairs], [m for _, m in pairs]


def _hue_mass(p, lo, hi):
    hue = load_uw71().hue_deg
    return p[(hue >= lo) & (hue <= hi)].sum()


def test_four_red_and_two_green_apples_give_two_groups_in_a_4_to_2_ratio():
    images, masks = _apples()
    result = concept_distribution(images, masks)
    assert [g.image_indices for g in result.groups] == [(0, 1, 2, 3), (4, 5)]
    assert [g.n_images for g in result.groups] == [4, 2] and result.n_images == 6
    assert_allclose(result.p.sum(), 1.0, rtol=1e-12)
    # all mass lands on red (hue 0-45°) or green (hue 90-160°) bins, 4:2
    assert_allclose(_hue_mass(result.p, 0, 45), 4 / 6, rtol=1e-12)
    assert_allclose(_hue_mass(result.p, 90, 160), 2 / 6, rtol=1e-12)
    # the dominant bin is the UW-71 color nearest (CIELAB) to the apples' red
    pal = load_uw71()
    nearest_red = np.argmin(np.linalg.norm(pal.lab - srgb_to_lab(np.uint8(RED)), axis=1))
    assert np.argmax(result.p) == nearest_red


def test_group_palette_holds_the_apple_colors_with_weights():
    images, masks = _apples()
    red, green = concept_distribution(images, masks).groups
    assert_allclose(red.weights.sum(), 1.0, rtol=1e-12)
    assert red.rgb.dtype == np.uint8 and red.lab.shape == (len(red.weights), 3)
    assert np.all(np.diff(red.weights) <= 0)  # heaviest first
    # the heaviest merged color is within a few ΔE00 of the body color, not the background
    assert delta_e_2000(red.lab[0], srgb_to_lab(np.uint8(RED))) < 8
    assert delta_e_2000(green.lab[0], srgb_to_lab(np.uint8(GREEN))) < 8
    # every merged color is one of the apple's own colors (bin means: no bin-centre offset),
    # none is the background
    for group, colors in ((red, (RED, RED_SHINE)), (green, (GREEN, GREEN_SHINE))):
        truth = srgb_to_lab(np.uint8(colors))
        nearest = delta_e_2000(group.lab[:, None], truth[None]).min(axis=1)
        assert np.all(nearest < 3), nearest
        assert np.all(delta_e_2000(group.lab, srgb_to_lab(np.uint8(BACKGROUND))) > 25)


def test_distribution_does_not_depend_on_image_order():
    images, masks = _apples()
    order = [5, 2, 0, 4, 1, 3]
    shuffled = concept_distribution([images[i] for i in order], [masks[i] for i in order])
    assert_allclose(shuffled.p, concept_distribution(images, masks).p, atol=1e-15)
    assert shuffled.groups[0].image_indices == (1, 2, 4, 5)


def test_single_coloring_gives_one_group():
    image, mask = _apples()[0][0], _apples()[1][0]
    result = image_distribution(image, mask)
    assert len(result.groups) == 1 and result.groups[0].image_indices == (0,)
    assert_allclose(_hue_mass(result.p, 0, 45), 1.0, rtol=1e-12)


def test_close_shades_of_two_colorings_merge_where_the_mean_of_their_own_distributions_splits():
    # docs/research.md, "From a concept's colorings to its P_H": one extraction over the set
    hexes = list(load_uw71().hex)
    flat = [
        np.full((120, 120, 3), [int(h[i : i + 2], 16) for i in (1, 3, 5)], np.uint8)
        for h in ("#fcdb42", "#f7db7c")
    ]
    mask = np.ones((120, 120), bool)
    together = concept_distribution(flat, [mask, mask]).p
    mean = np.mean([concept_distribution([image], [mask]).p for image in flat], axis=0)
    assert together[hexes.index("#f7db7c")] == pytest.approx(1.0)
    assert mean[hexes.index("#fcdb42")] == mean[hexes.index("#f7db7c")] == pytest.approx(0.5)


def test_image_pixels_crops_the_mask_box_and_keeps_masked_pixels_only():
    image = np.zeros((300, 400, 3), dtype=np.uint8)
    image[:, :, 2] = 255
    mask = np.zeros((300, 400), dtype=bool)
    mask[50:250, 100:140] = True  # a 200×40 box, stretched to 100×100
    image[50:250, 100:120] = (255, 0, 0)
    image[50:250, 120:140] = (0, 255, 0)
    px = image_pixels(image, mask)
    assert px.shape == (10_000, 3) and px.dtype == np.uint8
    colors, counts = np.unique(px, axis=0, return_counts=True)
    assert_array_equal(colors, [[0, 255, 0], [255, 0, 0]])
    assert_array_equal(counts, [5000, 5000])


def test_image_pixels_creates_no_new_colors_and_drops_unmasked_pixels():
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, size=(257, 233, 3), dtype=np.uint8)
    mask = rng.random((257, 233)) < 0.3
    px = image_pixels(image, mask)
    masked = {tuple(c) for c in image[mask]}
    assert 0 < len(px) < 10_000
    assert all(tuple(c) in masked for c in px)


def test_rgba_counts_only_fully_opaque_pixels():
    image = np.zeros((10, 10, 4), dtype=np.uint8)
    image[..., :3] = (255, 0, 0)
    image[..., 3] = 255
    image[:, 5:, :3] = (0, 0, 255)
    image[:, 5:, 3] = 254  # almost opaque: still excluded
    px = image_pixels(image, np.ones((10, 10), dtype=bool))
    assert_array_equal(np.unique(px, axis=0), [[255, 0, 0]])
    image[..., 3] = 0
    with pytest.raises(ValueError, match="`mask` is empty"):
        image_pixels(image, np.ones((10, 10), dtype=bool))


def test_thin_mask_falls_back_to_all_masked_pixels():
    image = np.zeros((1000, 1000, 3), dtype=np.uint8)
    mask = np.zeros((1000, 1000), dtype=bool)
    mask[0, 0] = mask[999, 999] = mask[500, 3] = True  # no sample lands on these
    image[mask] = (9, 9, 9)
    assert_array_equal(image_pixels(image, mask), np.full((3, 3), 9, dtype=np.uint8))


def test_dominant_color_is_the_centre_of_the_fullest_16_bin():
    px = np.array([[0, 0, 0]] * 3 + [[250, 250, 250]] * 2, dtype=np.uint8)
    assert_allclose(dominant_color(px), srgb_to_lab(np.array([7.5, 7.5, 7.5]) / 255), atol=1e-12)
    tie = np.array([[255, 255, 255], [0, 0, 0]], dtype=np.uint8)
    assert_allclose(dominant_color(tie), srgb_to_lab(np.array([7.5, 7.5, 7.5]) / 255), atol=1e-12)


def test_group_images_links_transitively():
    lab = np.array([[50, 0, 0], [58, 0, 0], [66, 0, 0], [20, 40, 40]], dtype=float)
    assert delta_e_2000(lab[0], lab[2]) > 12 and delta_e_2000(lab[0], lab[1]) <= 12
    assert group_images(lab) == [[0, 1, 2], [3]]
    assert group_images(lab, threshold=1.0) == [[0], [1], [2], [3]]


def test_merge_colors_takes_the_weighted_mean_heaviest_first():
    lab = np.array([[50, 10, 10], [52, 10, 10], [80, -40, 30]], dtype=float)
    merged, weights = merge_colors(lab, np.array([1.0, 3.0, 2.0]))
    assert_allclose(weights, [4.0, 2.0])
    assert_allclose(merged, [[51.5, 10, 10], [80, -40, 30]], rtol=1e-12)


def test_top_colors_cut_keeps_the_most_populated_bins():
    px = np.array([[0, 0, 0]] * 5 + [[255, 255, 255]] * 3 + [[0, 0, 255]] * 1, dtype=np.uint8)
    result = distribution_from_pixels([px], top_colors=2)
    assert load_uw71().hex[24] == "#000000" and load_uw71().hex[28] == "#ffffff"
    assert_allclose(result.p[[24, 28]], [5 / 8, 3 / 8], rtol=1e-12)
    assert_allclose(result.p.sum(), 1.0, rtol=1e-12)


def _bad_inputs():
    good, mask = np.zeros((8, 8, 3), np.uint8), np.ones((8, 8), bool)
    empty = np.zeros((8, 8), bool)
    return [
        (([], []), "`images` is empty"),
        (([good], [mask, mask]), "`masks` has 2 entries but `images` has 1"),
        (([good, good.astype(float)], [mask, mask]), r"`images\[1\]` must be an \(H, W, 3\)"),
        (([np.zeros((8, 8, 2), np.uint8)], [mask]), r"`images\[0\]` must be .* got shape \(8, 8, 2\)"),
        (([good], [mask.astype(np.uint8)]), r"`masks\[0\]` must be an \(H, W\) boolean array"),
        (
            ([good, good], [mask, np.ones((8, 9), bool)]),
            r"`masks\[1\]` has size \(8, 9\) but `images\[1\]` has \(8, 8\)",
        ),
        (([good, good, good], [mask, mask, empty]), r"`masks\[2\]` is empty"),
    ]


@pytest.mark.parametrize("args, message", _bad_inputs())
def test_concept_distribution_rejects_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        concept_distribution(*args)


def test_distribution_from_pixels_rejects_bad_pixel_sets():
    with pytest.raises(ValueError, match="`pixels` is empty"):
        distribution_from_pixels([])
    with pytest.raises(ValueError, match=r"`pixels\[1\]` must be a non-empty \(N, 3\) uint8"):
        distribution_from_pixels([np.zeros((4, 3), np.uint8), np.zeros((0, 3), np.uint8)])
    with pytest.raises(ValueError, match="`size` must be a positive integer"):
        image_pixels(np.zeros((4, 4, 3), np.uint8), np.ones((4, 4), bool), size=0)


def _noisy_flat(rgb, sigma: float, n: int, rng) -> np.ndarray:
    values = np.asarray(rgb, float) + rng.normal(0.0, sigma, (n, 3))
    return np.clip(np.round(values), 0, 255).astype(np.uint8)


# Flat colors whose channels sit on 8x8x8 bin boundaries (multiples of 32), where pixel
# noise splits them over two or more bins, and a few inside bins.
BOUNDARY_COLORS = [
    (200, 30, 30),
    (192, 32, 32),
    (224, 128, 64),
    (96, 160, 32),
    (32, 32, 192),
    (128, 128, 128),
    (255, 224, 96),
    (64, 96, 160),
    (160, 64, 192),
    (30, 100, 60),
]


@pytest.mark.parametrize("rgb", BOUNDARY_COLORS)
def test_a_flat_color_with_noise_lands_in_the_uw71_bin_nearest_the_true_color(rgb):
    rng = np.random.default_rng(sum(rgb))
    pixels = [_noisy_flat(rgb, 4.0, 10_000, rng) for _ in range(3)]
    p = distribution_from_pixels(pixels).p
    true_bin = int(nearest_uw71(srgb_to_lab(np.asarray(rgb, float) / 255.0)[None])[0])
    assert p[true_bin] >= 0.95, (rgb, true_bin, np.argsort(p)[::-1][:3], np.sort(p)[::-1][:3])


def test_bin_centres_are_a_named_option_and_split_the_paper_example():
    rng = np.random.default_rng(0)
    pixels = [_noisy_flat((200, 30, 30), 4.0, 10_000, rng)]
    means = distribution_from_pixels(pixels, bin_color="mean").p
    centres = distribution_from_pixels(pixels, bin_color="centre").p
    assert np.sort(means)[-1] >= 0.95
    assert np.sort(centres)[-1] < 0.8 and np.sort(centres)[-2] > 0.2
    with pytest.raises(ValueError, match="`bin_color` must be one of \\('mean', 'centre'\\)"):
        distribution_from_pixels(pixels, bin_color="median")
