/// The web frontend's files (docs/frontend.md): the page, its style sheet and its script in
/// `Pages/`, compiled into the binary as SwiftPM resources (`.embedInCode`: the static release
/// build has no resource bundle to find at run time), by the path they are served at.
public enum FrontendPages {
    /// One file as served: its media type and its bytes.
    public struct File: Sendable {
        public let contentType: String
        public let body: [UInt8]

        init(_ contentType: String, _ bytes: [UInt8]) {
            self.contentType = contentType
            // Served without the file's final newlines (as the pages always were).
            body = Array(bytes[..<(bytes.lastIndex { $0 != UInt8(ascii: "\n") }.map { $0 + 1 } ?? 0)])
        }
    }

    /// The files by the path they are served at (`/` is `/index.html`).
    public static let files: [String: File] = [
        "/index.html": File("text/html; charset=utf-8", PackageResources.index_html),
        "/app.css": File("text/css; charset=utf-8", PackageResources.app_css),
        "/app.js": File("text/javascript; charset=utf-8", PackageResources.app_js),
    ]
}
