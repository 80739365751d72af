import Foundation
import Frontend
import Testing

/// The Frontend module: its pages, compiled in as resources, are the files of `Pages/`.
@Suite struct FrontendPagesTests {
    /// Every file of Sources/Frontend/Pages is served, as it is on disk (without its final
    /// newlines), with its media type.
    @Test func pagesAreTheFilesOfTheFrontendModule() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/Frontend/Pages").standardized
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { !$0.hasPrefix(".") }.sorted()
        #expect(names == ["app.css", "app.js", "index.html"])
        #expect(FrontendPages.files.keys.sorted() == names.map { "/" + $0 })
        for name in names {
            var text = try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
            while text.hasSuffix("\n") { text.removeLast() }
            #expect(FrontendPages.files["/" + name]?.body == Array(text.utf8), "\(name)")
        }
        #expect(FrontendPages.files["/app.js"]?.contentType == "text/javascript; charset=utf-8")
    }
}
