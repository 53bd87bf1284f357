import { describe, expect, it } from "vitest"
import { markdownHtml } from "../../src/adapters/Markdown.js"
import { postHtml } from "../../src/adapters/OutputPages.js"

// A run's reports rendered as Fossil renders forum posts (issue 40): Markdown, to a safe subset;
// no raw HTML from the record passes.

const report = (text: string, mimetype = "text/x-markdown") => ({
  hash: "a".repeat(40), kind: "report", user: "lab", sender: "lab", time: "2026-12-06T08:00:00Z", mimetype, text
}) as never

describe("a report's Markdown", () => {
  it("is rendered: headings, paragraphs, lists, code, emphasis and links", () => {
    const html = postHtml(report([
      "## What ran",
      "",
      "The **tests** ran in *3 s*, see [the run page](/ext/ocx2-cgi/watch?run=abc&x=1) or <https://example.org/a?b=1>.",
      "",
      "- one `a < b`",
      "- two",
      "",
      "1. first",
      "",
      "```json",
      `{"ok": true}`,
      "```",
      "> quoted"
    ].join("\n")), "/ext/ocx2-cgi")
    expect(html).toContain(`<div class="ocx-markdown"><h2>What ran</h2>`)
    expect(html).toContain(`<p>The <strong>tests</strong> ran in <em>3 s</em>, see <a href="/ext/ocx2-cgi/watch?run=abc&amp;x=1">the run page</a> or <a href="https://example.org/a?b=1">https://example.org/a?b=1</a>.</p>`)
    expect(html).toContain(`<ul><li>one <code>a &lt; b</code></li><li>two</li></ul>`)
    expect(html).toContain(`<ol><li>first</li></ol>`)
    expect(html).toContain(`<pre><code class="language-json">{&quot;ok&quot;: true}</code></pre>`)
    expect(html).toContain(`<blockquote><p>quoted</p></blockquote>`)
  })

  it("lets no HTML from the record through: tags, attributes and script links are text", () => {
    const attempt = [
      `<script>alert(1)</script>`,
      `<img src=x onerror="alert(2)">`,
      `# <b onmouseover=alert(3)>title</b>`,
      `[click](javascript:alert(4)) [data](data:text/html,<script>alert(5)</script>) [far](//evil.example/x)`,
      `- <iframe src="https://evil.example"></iframe>`,
      "`<svg onload=alert(6)>`",
      `**<a href="javascript:alert(7)">bold</a>**`,
      `[x](https://ok.example/"onmouseover="alert(8))`
    ].join("\n\n")
    const html = markdownHtml(attempt)
    for (const tag of ["<script", "<img", "<b ", "<iframe", "<svg", `<a href="javascript`, "<a href=\"data", "<a href=\"//"]) {
      expect(html).not.toContain(tag)
    }
    // a link has its href alone, the quote inside it escaped: no attribute of the record's
    for (const m of html.matchAll(/<a [^>]*>/g)) expect(m[0]).toMatch(/^<a href="[^"]*">$/)
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;")
    expect(html).toContain("&lt;img src=x onerror=&quot;alert(2)&quot;&gt;")
    expect(html).toContain("[click](javascript:alert(4))")
    // the only tags are the renderer's own
    const tags = [...html.matchAll(/<\/?([a-z0-9]+)/g)].map((m) => m[1])
    expect(new Set(tags)).toEqual(new Set(["p", "h1", "ul", "li", "code", "strong", "a"]))
    for (const m of html.matchAll(/<a href="([^"]*)"/g)) expect(m[1]).toBe("https://ok.example/&quot;onmouseover=&quot;alert(8")
  })

  it("a report that is not Markdown is shown as written, escaped", () => {
    expect(postHtml(report("<b>*x*</b>", "text/plain"), "")).toContain("<pre>&lt;b&gt;*x*&lt;/b&gt;</pre>")
  })
})
