// Durations and numbers of seconds that come from outside (the file, the environment,
// `bridge/request/…` payloads, the web frontend, the command line): one checked parser, with one
// documented maximum (docs/configuration.md, "Durations"). Anything out of range is an error that
// names the limit, never a trap.

/// The bounds every duration from outside is held to.
public enum DurationLimits {
    /// The longest duration anything accepts: 365 days (`365d`). Long enough for any retention
    /// (`database.history_max_age`) and far below what the conversions and the clock arithmetic
    /// downstream can hold (milliseconds in `Int64`, instants in `Duration`).
    public static let maximum: Duration = .seconds(maximumSeconds)
    /// ``maximum`` in whole seconds.
    public static let maximumSeconds: Int64 = 365 * 86_400
    /// ``maximum`` as the file writes it.
    public static let maximumText = "365d"
}

/// What is wrong with a duration (the caller adds the key path).
public struct DurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The seconds of one unit of a duration's text: `ms`, `s`, `m`, `h`, `d`.
private let durationUnits: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]

/// A duration's text: `500ms`, `5s`, `2m`, `1h`, `7d`, or a bare number of seconds (may be
/// fractional, e.g. `1.5`), rounded to the millisecond, within `range` (by default 0 to
/// ``DurationLimits/maximum``; a range may only narrow that).
public func checkedDuration(_ text: String, in range: ClosedRange<Duration> = .zero...DurationLimits.maximum) throws(DurationError) -> Duration {
    let t = text.trimmingCharacters(in: " ")
    var number = Substring(t), scale = 1.0
    for unit in durationUnits where t.hasSuffix(unit.suffix) {
        number = t.dropLast(unit.suffix.count)
        scale = unit.seconds
        break
    }
    // Digits, sign, point and exponent only: no "nan", "inf", hex floats or unit-less junk.
    guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) }), let v = Double(number) else {
        throw DurationError("'\(text)' is not a duration (expected e.g. 500ms, 5s, 2m, 1h or 7d; a bare number is seconds)")
    }
    // A finite number whose unit takes it past a double (`1e307d`) is simply too long.
    let seconds = v * scale
    do {
        return try checkedDuration(seconds: seconds.isFinite || !v.isFinite ? seconds : v.sign == .minus ? -.greatestFiniteMagnitude : .greatestFiniteMagnitude,
                                   in: range)
    } catch {
        throw DurationError("'\(text)' \(error.message)")
    }
}

/// A number of seconds from outside (a JSON number, a command-line option) as a duration,
/// rounded to the millisecond, within `range` (by default 0 to ``DurationLimits/maximum``).
/// NaN, infinities, negative numbers and numbers past the range are errors that name the limit.
/// The message starts with the verb ("is …"): the caller puts the value or the key first.
public func checkedDuration(seconds: Double, in range: ClosedRange<Duration> = .zero...DurationLimits.maximum) throws(DurationError) -> Duration {
    let lower = max(range.lowerBound, .zero), upper = min(range.upperBound, DurationLimits.maximum)
    guard seconds.isFinite else { throw DurationError("is not a finite number of seconds") }
    guard seconds >= 0 else { throw DurationError("is negative (a duration is 0 or more)") }
    // Compared as doubles before any conversion: the bound is far inside Int64 milliseconds.
    guard seconds <= upper.checkedSeconds else {
        throw DurationError("is above the maximum of \(secondsText(upper))")
    }
    guard let ms = Int64(exactly: (seconds * 1000).rounded()) else {  // cannot fail after the bound
        throw DurationError("is above the maximum of \(secondsText(upper))")
    }
    let d = Duration.milliseconds(ms)
    guard d >= lower else { throw DurationError("is below the minimum of \(secondsText(lower))") }
    return min(d, upper)
}

extension Duration {
    /// The duration in seconds as a double, for bounds of ``checkedDuration(seconds:in:)``
    /// (durations held to ``DurationLimits/maximum``: exact in a double to the millisecond).
    var checkedSeconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds / 1_000_000_000_000_000) / 1000
    }
}

/// A limit in seconds for an error message: `600 s`, `0.001 s`; the overall maximum as
/// `31536000 s (365d)`.
public func secondsText(_ d: Duration) -> String {
    let c = d.components
    let ms = c.attoseconds / 1_000_000_000_000_000
    var fraction = String(String(1000 + ms).dropFirst())  // 5 ms → "005"
    while fraction.last == "0" { fraction.removeLast() }
    var text = fraction.isEmpty ? "\(c.seconds) s" : "\(c.seconds).\(fraction) s"
    if d == DurationLimits.maximum { text += " (\(DurationLimits.maximumText))" }
    return text
}

/// `500ms`, `5s`, `2m`, `1h`, `7d`, or a bare number of seconds (may be fractional); nil for
/// anything else or anything out of 0…``DurationLimits/maximum`` (``checkedDuration(_:in:)``
/// says why).
func parseDuration(_ text: String) -> Duration? {
    try? checkedDuration(text)
}

extension DurationLimits {
    /// The text ``checkedDuration(_:in:)`` reads, as a JSON Schema pattern (docs/config-schema.json):
    /// a number of 0 or more (fraction and exponent allowed) and an optional unit.
    public static let pattern = "^ *\\+?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?(ms|s|m|h|d)? *$"
}
