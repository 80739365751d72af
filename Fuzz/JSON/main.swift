// fuzz-modules: InternalCollectionsUtilities OrderedCollections BinaryCoding
// JSON parser fuzz target: any bytes either parse or throw JSONParseError; what parses
// must survive serialise → parse unchanged.
import BinaryCoding

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let value = try? JSONValue(parsing: bytes) else { return 0 }
    let again = try? JSONValue(parsing: value.jsonText)
    if !containsNonFinite(value) && again != value { fatalError("JSON round trip changed the value") }
    return 0
}

private func containsNonFinite(_ v: JSONValue) -> Bool {
    switch v {
    case let .double(d): return !d.isFinite
    case let .array(a): return a.contains(where: containsNonFinite)
    case let .object(o): return o.members.contains { containsNonFinite($0.value) }
    default: return false
    }
}
