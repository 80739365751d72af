/// Whether a response reports success, with a stable failure code for the bridge's command
/// lifecycle (spec gopro.md §4.1 status byte, §4.3 `EnumResultGeneric` and error form).
public enum GoProOutcome: Sendable, Equatable {
    case success
    /// `code`: `error`, `invalid_parameter`, `reserved_status_<n>` (TLV, §4.1); the lower-cased
    /// result name without `RESULT_` (`ill_formed`, `not_supported`, …) for protobuf (§4.3);
    /// `unsupported_protobuf` for the `[feature][status]` error form.
    case failure(code: String)
}

extension GoProResponse {
    /// The outcome of a response, or `nil` for messages that carry no status (query pushes,
    /// protobuf notifications without a result, unknown protobuf messages).
    public var outcome: GoProOutcome? {
        switch self {
        case let .command(r): return Self.tlvOutcome(r.status)
        case let .setting(r): return Self.tlvOutcome(r.status)
        case let .query(q): return q.query?.isPush == true ? nil : Self.tlvOutcome(q.status)
        case .protobufError: return .failure(code: "unsupported_protobuf")
        case let .protobuf(p):
            let result: OpenGopro_EnumResultGeneric?
            switch p.message {
            case let m as OpenGopro_ResponseGeneric: result = m.result
            case let m as OpenGopro_ResponseLastCapturedMedia: result = m.hasResult ? m.result : nil
            case let m as OpenGopro_ResponseStartScanning: result = m.result
            case let m as OpenGopro_ResponseGetApEntries: result = m.result
            case let m as OpenGopro_ResponseConnect: result = m.result
            case let m as OpenGopro_ResponseConnectNew: result = m.result
            case let m as OpenGopro_ResponseCOHNCert: result = m.hasResult ? m.result : nil
            case .some: return isAsynchronous ? nil : .success  // e.g. NotifyPresetStatus answering a query
            case nil: return nil
            }
            guard let result else { return nil }
            if result == .resultSuccess { return .success }
            let name = "\(result)"  // e.g. resultIllFormed
            return .failure(code: Self.snake(name.hasPrefix("result") ? String(name.dropFirst(6)) : name))
        }
    }

    private static func tlvOutcome(_ status: UInt8) -> GoProOutcome {
        switch status {
        case 0: return .success
        case 1, 2: return .failure(code: GoProTLVStatus.name(status))
        default: return .failure(code: "reserved_status_\(status)")
        }
    }

    private static func snake(_ camel: String) -> String {
        var out = ""
        for ch in camel {
            if ch.isUppercase {
                if !out.isEmpty { out.append("_") }
                out.append(contentsOf: ch.lowercased())
            } else {
                out.append(ch)
            }
        }
        return out
    }
}
