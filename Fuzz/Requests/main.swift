// fuzz-modules: InternalCollectionsUtilities OrderedCollections BinaryCoding
// fuzz-sources: Sources/BridgeCore/CommandLifecycle.swift
// The request parsers' fuzz target (docs/security.md): any bytes published to `<device>/set` or
// `<device>/set/<attribute>` either parse into commands or throw a CommandError that says what is
// wrong — never a trap, never an empty command, never a `transaction` left in a command's body;
// an array is refused whole beyond its limit. The same bytes as a `bridge/request/…` body are
// replayed through the whole bridge by BridgeCoreTests' RequestCorpusTests.
import BinaryCoding

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    do throws(CommandError) {
        let commands = try parseSetPayload(bytes, maxCommands: 100)
        if commands.isEmpty || commands.count > 100 { fatalError("\(commands.count) commands parsed") }
        for c in commands where c.body.isEmpty || c.body["transaction"] != nil { fatalError("a command body \(c.body)") }
    } catch {
        if error.message.isEmpty { fatalError("an error without a message: \(error.code)") }
    }
    // The shortcut takes anything: JSON, ON/OFF, or the text itself.
    _ = parseShortcutValue(bytes)
    return 0
}
