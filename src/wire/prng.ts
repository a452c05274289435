// A seeded xorshift32 generator for the differential tests of the codec and its scanners: the same corpus of
// random and mutated messages every run, so a failure can be replayed. Not for anything that needs secrecy.

/** `rand(n)`: an integer in [0, n), from the sequence that `seed` starts. */
export function seededRandom(seed: number): (n: number) => number {
  let s = seed >>> 0 || 1;
  return (n: number): number => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s % n;
  };
}
