// Package limits is the pure arithmetic of the `ratelimit` and `quota`
// middleware: a token bucket and a cost window. It holds no clock and no
// storage: each function takes the persisted state and the time "now",
// and returns the decision and the state to persist. The store keeps the
// state in one transaction per call, so concurrent callers in any process
// never spend the same tokens, and a restart does not reset a limit.
//
// # Token bucket (Bucket, Take)
//
// A Bucket holds at most Capacity tokens and gains Refill tokens every
// Interval ("10 per minute" is {Capacity: 10, Refill: 10, Interval:
// time.Minute}; a larger Capacity allows bursts). The state is one number,
// the theoretical arrival time TAT in Unix nanoseconds (the generic cell
// rate algorithm): the bucket is full when TAT <= now; each token moves TAT
// on by Interval/Refill; a take of cost c is allowed when TAT' = max(TAT,
// now) + c·Interval/Refill stays within Capacity tokens' span of now. This
// is the same encoding internal/store's rate_buckets table holds. All
// arithmetic is on int64 nanoseconds with 128-bit intermediate products:
// no float drift, and nothing overflows silently (an unrepresentable
// bucket is an error). A take of c tokens moves TAT by c·Interval/Refill
// rounded down to a nanosecond, as the store does; the refill is exact
// when Interval is a multiple of Refill nanoseconds (any "N per second,
// minute, hour or day" with N dividing the period in ns), and otherwise
// gains at most one token per Interval/Refill ns, i.e. at most one part in
// Interval/Refill ns too many (one in a million for 1000 per second).
//
// Properties (tested): over any interval of length d, the cost allowed is
// at most Capacity + d/floor(Interval/Refill) (Capacity + Refill·d/Interval
// exactly when the division is exact); a bucket left alone for
// Capacity/Refill·Interval is full again, exactly; a clock that goes
// backwards never gives tokens back (TAT stays where it was, so the
// caller waits longer, never less); a cost above Capacity is never
// allowed and says so; a refused take does not change the state.
//
// # Cost window (Window, Spend)
//
// A Window allows Limit cost units per Length, in windows aligned to the
// Unix epoch (a "per day" window resets at 00:00 UTC). The state is the
// start of the current window and the units used in it. A spend is
// allowed when used + cost <= Limit; a refusal says when the window ends.
// Within any one window the units spent never exceed Limit (tested); as
// with any fixed-window quota, a span straddling a boundary can see up to
// 2·Limit. A clock that goes backwards into an earlier window is treated
// as still in the stored window: it never resets the count.
//
// # Refusal text
//
// Outcome.Message gives what the agent sees, e.g. "rate limit: 10 per
// minute for agent ops on tool weather; try again in 4.2 s". The wait is
// rounded up to a tenth of a second, so retrying after it succeeds.
package limits
