extension Duration {
    /// The whole duration in seconds, sub-second part included (`500ms` → 0.5).
    var seconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }

    /// The duration in whole milliseconds (towards zero), saturating at `Int64`'s bounds: integer
    /// arithmetic only, no conversion of a double.
    var wholeMilliseconds: Int64 {
        let c = components
        let (ms, overflow) = c.seconds.multipliedReportingOverflow(by: 1000)
        let (sum, carry) = ms.addingReportingOverflow(c.attoseconds / 1_000_000_000_000_000)
        return overflow || carry ? (c.seconds < 0 ? .min : .max) : sum
    }
}
