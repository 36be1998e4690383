"""An existing NumPy script, accelerated unchanged: a Black-Scholes option pricer.

The pricing functions below are plain NumPy, as they would be in any script; the only change is
``tracearray.compile(price_options)`` at the bottom. The compiled pricer computes call and put
prices in one fused kernel (no temporaries for the CDF and the exponentials).

    python examples/black_scholes.py [n_options]
"""
import sys
import time

import numpy as np

import tracearray

RATE = 0.02
VOLATILITY = 0.30


def normal_cdf(x):
    """The standard normal CDF (Abramowitz and Stegun 26.2.17, |error| < 7.5e-8)."""
    t = 1.0 / (1.0 + 0.2316419 * np.abs(x))
    poly = t * (0.319381530 + t * (-0.356563782 + t * (1.781477937
                + t * (-1.821255978 + t * 1.330274429))))
    tail = np.exp(-0.5 * x * x) * 0.3989422804014327 * poly
    return np.where(x >= 0, 1.0 - tail, tail)


def price_options(spot, strike, years):
    """European call and put prices."""
    vol_sqrt_t = VOLATILITY * np.sqrt(years)
    d1 = (np.log(spot / strike) + (RATE + 0.5 * VOLATILITY ** 2) * years) / vol_sqrt_t
    d2 = d1 - vol_sqrt_t
    discounted_strike = strike * np.exp(-RATE * years)
    call = spot * normal_cdf(d1) - discounted_strike * normal_cdf(d2)
    put = discounted_strike * normal_cdf(-d2) - spot * normal_cdf(-d1)
    return call, put


def best_of(fn, *args, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def main(n: int) -> None:
    rng = np.random.default_rng(0)
    spot = rng.uniform(50.0, 150.0, n)
    strike = rng.uniform(50.0, 150.0, n)
    years = rng.uniform(0.1, 2.0, n)

    fast_pricer = tracearray.compile(price_options, device="cpu")
    call, put = fast_pricer(spot, strike, years)
    ref_call, ref_put = price_options(spot, strike, years)
    print(f"{n} options; max |difference| from NumPy: call "
          f"{np.max(np.abs(call - ref_call)):.1e}, put {np.max(np.abs(put - ref_put)):.1e}")
    # put-call parity holds: C - P = S - K exp(-rT)
    parity = np.max(np.abs(call - put - (spot - strike * np.exp(-RATE * years))))
    print(f"put-call parity error: {parity:.1e}")
    t_numpy = best_of(price_options, spot, strike, years)
    t_fast = best_of(fast_pricer, spot, strike, years)
    print(f"NumPy {t_numpy * 1e3:.2f} ms, tracearray {t_fast * 1e3:.2f} ms per call")
    assert np.allclose(call, ref_call, atol=1e-9) and np.allclose(put, ref_put, atol=1e-9)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
