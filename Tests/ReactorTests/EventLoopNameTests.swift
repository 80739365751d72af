import Foundation
import Reactor
import Testing

@Suite("EventLoop thread name")
struct EventLoopNameTests {
    @Test("the loop thread carries the loop's name (first 15 bytes) in the kernel")
    func threadName() async {
        let loop = EventLoop(name: "t-named-loop-with-a-long-name")
        defer { loop.shutdown() }
        let comm = await withCheckedContinuation { (c: CheckedContinuation<String, Never>) in
            loop.execute {
                let text = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                c.resume(returning: text.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
        #expect(comm == "t-named-loop-wi")
    }
}
