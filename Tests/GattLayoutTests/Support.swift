import BinaryCoding
import GattLayout
import Testing

/// Test helpers: hex in, JSON out, layouts.
func bytes(_ hex: String) -> [UInt8] { (try? Hex.decode(hex)) ?? [] }

func json(_ text: String) -> JSONValue {
    do { return try JSONValue(parsing: text) } catch {
        Issue.record("bad JSON in test: \(error)")
        return .null
    }
}

func layout(_ text: String) throws -> GattLayout { try GattLayout(json: json(text)) }

func builtin(_ b: BuiltinLayout) throws -> GattLayout { try b.layout() }

/// The layout error thrown by `body`, or nil (recorded as an issue) when it does not throw.
func layoutError(_ body: () throws -> Void) -> GattLayoutError? {
    do {
        try body()
        Issue.record("expected a GattLayoutError")
        return nil
    } catch let error as GattLayoutError {
        return error
    } catch {
        Issue.record("expected a GattLayoutError, got \(error)")
        return nil
    }
}
