"""The max-batch search against a fake device with a known limit: never over it, always verified."""

import math

import pytest
from batchlab.core.analysis.batch_search import DEFAULT_MARGIN, DEFAULT_RESOLUTION, Trial, find_max_batch


class FakeDevice:
    """Batches up to `capacity` fit; a verification (a longer run) fits only up to `verified_capacity`."""

    def __init__(self, capacity: int, verified_capacity: int | None = None):
        self.capacity = capacity
        self.verified_capacity = capacity if verified_capacity is None else verified_capacity
        self.asked: list[tuple[int, bool]] = []

    def __call__(self, b: int, verify: bool) -> Trial:
        self.asked.append((b, verify))
        fits = b <= (self.verified_capacity if verify else self.capacity)
        return Trial(b, fits, verify=verify, peak_bytes=1000 + 10 * b if fits else -1)


def _check(result, device: FakeDevice, data: int):
    assert all(1 <= b <= data for b, _ in device.asked)  # never more samples than the data has
    if result.batch_size is not None:
        assert result.batch_size <= min(device.capacity, device.verified_capacity)  # never over the limit
        assert device.asked[-1] == (result.batch_size, True)  # the answer was the last thing verified
        assert result.verification.batch_size == result.batch_size


@pytest.mark.parametrize("capacity", [1, 2, 3, 7, 8, 9, 63, 64, 65, 100, 513, 1000, 4095, 4096, 9999])
@pytest.mark.parametrize("start", [1, 8, 64])
def test_never_over_the_limit_always_verified_and_close_below_it(capacity, start):
    data = 10_000
    device = FakeDevice(capacity)
    result = find_max_batch(device, limit=data, start=start)
    _check(result, device, data)
    assert result.limited_by == "memory"
    assert result.largest_ok <= capacity < result.smallest_oom
    assert result.largest_ok >= capacity * (1 - DEFAULT_RESOLUTION) - 1  # the bisection got close
    assert result.batch_size == max(1, math.floor(result.largest_ok * (1 - DEFAULT_MARGIN)))
    assert len(device.asked) <= 2 * math.log2(data) + 3  # powers of two, then a bisection


def test_data_smaller_than_memory_reports_the_data_size_without_a_margin():
    device = FakeDevice(capacity=50_000)
    result = find_max_batch(device, limit=3000, start=8)
    _check(result, device, 3000)
    assert result.limited_by == "data" and result.batch_size == 3000 and result.smallest_oom is None
    assert [b for b, _ in device.asked] == [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3000, 3000]


def test_even_batch_one_does_not_fit():
    device = FakeDevice(capacity=0)
    result = find_max_batch(device, limit=1000, start=8)
    assert result.batch_size is None and result.largest_ok is None
    assert [b for b, _ in device.asked] == [8, 4, 2, 1]  # bisected down to one sample, nothing verified


@pytest.mark.parametrize("verified", [900, 700, 300, 1])
def test_a_verification_that_fails_shrinks_the_answer_until_one_passes(verified):
    # Short probes fit up to 1000, but a longer run only up to `verified` (allocator growth, fragmentation).
    device = FakeDevice(capacity=1000, verified_capacity=verified)
    result = find_max_batch(device, limit=10_000, start=8)
    _check(result, device, 10_000)
    assert result.batch_size <= verified
    assert result.batch_size >= math.floor(verified * (1 - DEFAULT_MARGIN))  # shrunk by the margin, not more
    assert (
        sum(verify for _, verify in device.asked) <= 1 + math.log(1000 / verified) / -math.log(1 - DEFAULT_MARGIN) + 1
    )


def test_margin_and_start_are_the_callers():
    device = FakeDevice(capacity=1000)
    result = find_max_batch(device, limit=10_000, start=100, margin=0.25)
    assert device.asked[0] == (100, False)
    assert result.batch_size == math.floor(result.largest_ok * 0.75)


def test_the_answer_in_words_names_the_failed_verifications_and_the_margin():
    from batchlab.core.sweep.max_batch import describe_result

    device = FakeDevice(capacity=1000, verified_capacity=700)
    result = find_max_batch(device, limit=10_000, start=8)
    failed = [b for b, verify in device.asked if verify and b > 700]
    assert result.failed_verifications == failed and failed  # 900 (1000 less 10%) and 810 did not verify
    first, answer = describe_result(result)
    assert first.startswith(f"largest batch that fitted a 3-step try: {result.largest_ok:,} (batch ")
    assert first.endswith(f"; {', '.join(f'{b:,}' for b in failed)} did not fit the 20-step verification")
    peak = (1000 + 10 * result.batch_size) / (1 << 20)
    assert answer == f"max batch: {result.batch_size:,} (10% safety margin; verified with 20 training steps and a " + (
        f"validation pass, peak {peak:,.0f} MiB)"
    )
    assert describe_result(find_max_batch(FakeDevice(0), limit=8), cap_bytes=100 << 20) == [
        "even batch 1 does not fit on this device within 100 MiB"
    ]
