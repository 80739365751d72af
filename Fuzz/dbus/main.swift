// fuzz-modules:
// D-Bus signature parser fuzz target (no libdbus needed: DBusType.swift and DBusError.swift are
// symlinked from Sources/DBus). Any bytes either parse or throw DBusError.invalidSignature with
// an offset inside the input; what parses must print back to the same text and re-parse equal.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    do {
        let types = try DBusType.parse(signature: text)
        let printed = types.map(\.signature).joined()
        if printed != text { fatalError("signature \(text) printed back as \(printed)") }
        for t in types where (try? DBusType(signature: t.signature)) != t {
            fatalError("single type \(t.signature) does not re-parse")
        }
    } catch {
        guard case let .invalidSignature(s, offset, _) = error, s == text,
              offset >= 0, offset <= text.utf8.count
        else { fatalError("unexpected error \(error) for \(text)") }
    }
    return 0
}
