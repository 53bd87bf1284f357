// A run's reports as Fossil shows forum posts (issue 40): Markdown, rendered here, to a small safe
// subset. Fossil's own renderer is reachable only as a test command (2.21's
// `fossil test-markdown-render --safe FILE`, a process for each report), and even --safe keeps
// raw HTML tags such as <img> and <b> and passes `javascript:` links on; no report's HTML may
// pass here, so the pages render: paragraphs, headings, fenced and indented code, lists, block quotes,
// code spans, emphasis, links and autolinks. Everything else is text: every character from the
// record is escaped first, no raw HTML passes, and a link goes only to http, https, mailto or a
// path on this site.

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/** A link's target as written (still escaped): kept only for http, https, mailto or this site. */
const safeHref = (escaped: string): string | undefined => {
  const raw = escaped.replace(/&amp;/g, "&")
  if (/^(https?:\/\/|mailto:)/i.test(raw)) return escaped
  if (/^[/?#]/.test(raw) && !raw.startsWith("//")) return escaped
  return undefined
}

/** Emphasis and links on text already escaped. */
const spans = (escaped: string): string =>
  escaped
    .replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (whole, text: string, href: string) => {
      const safe = safeHref(href)
      return safe === undefined ? whole : `<a href="${safe}">${text}</a>`
    })
    .replace(/&lt;(https?:\/\/[^\s&]+(?:&amp;[^\s&]+)*)&gt;/g, (_whole, url: string) => `<a href="${url}">${url}</a>`)
    .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>")
    .replace(/__([^_\n]+)__/g, "<strong>$1</strong>")
    .replace(/(^|[^*\w])\*([^*\s][^*\n]*?)\*(?!\w)/g, "$1<em>$2</em>")
    .replace(/(^|[^_\w])_([^_\s][^_\n]*?)_(?!\w)/g, "$1<em>$2</em>")

/** One paragraph's (or item's) text: code spans kept as written, the rest with its spans. */
export const inline = (text: string): string =>
  text.split(/(`+[^`]*?`+)/).map((part, i) => {
    if (i % 2 === 1) {
      const m = /^(`+)([^`]*?)\1$/.exec(part)
      if (m !== null) return `<code>${escape(m[2]!.trim())}</code>`
    }
    return spans(escape(part))
  }).join("")

const fence = /^\s{0,3}(```+|~~~+)\s*([\w+-]*)\s*$/
const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/
const bullet = /^\s{0,3}[-*+]\s+(.*)$/
const numbered = /^\s{0,3}\d{1,9}[.)]\s+(.*)$/
const quote = /^\s{0,3}>\s?(.*)$/
const rule = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/

/** Markdown to HTML, safe: see the top of this file. */
export const markdownHtml = (source: string): string => {
  const lines = source.replace(/\r\n?/g, "\n").split("\n")
  const out: Array<string> = []
  let i = 0
  const paragraph: Array<string> = []
  const flush = () => {
    if (paragraph.length > 0) out.push(`<p>${inline(paragraph.join("\n"))}</p>`)
    paragraph.length = 0
  }
  while (i < lines.length) {
    const line = lines[i]!
    const opened = fence.exec(line)
    if (opened !== null) {
      flush()
      const marker = opened[1]!
      const body: Array<string> = []
      i++
      while (i < lines.length && !lines[i]!.trim().startsWith(marker)) body.push(lines[i++]!)
      i++
      const language = opened[2] !== "" ? ` class="language-${escape(opened[2]!)}"` : ""
      out.push(`<pre><code${language}>${escape(body.join("\n"))}</code></pre>`)
      continue
    }
    if (line.trim() === "") {
      flush()
      i++
      continue
    }
    if (paragraph.length === 0 && /^( {4}|\t)/.test(line)) {
      const body: Array<string> = []
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]!) || lines[i]!.trim() === "")) body.push(lines[i++]!.replace(/^( {4}|\t)/, ""))
      while (body.length > 0 && body[body.length - 1]!.trim() === "") body.pop()
      out.push(`<pre><code>${escape(body.join("\n"))}</code></pre>`)
      continue
    }
    const h = heading.exec(line)
    if (h !== null) {
      flush()
      const level = h[1]!.length
      out.push(`<h${level}>${inline(h[2]!)}</h${level}>`)
      i++
      continue
    }
    if (rule.test(line)) {
      flush()
      out.push("<hr>")
      i++
      continue
    }
    if (quote.test(line)) {
      flush()
      const body: Array<string> = []
      while (i < lines.length && quote.test(lines[i]!)) body.push(quote.exec(lines[i++]!)![1]!)
      out.push(`<blockquote>${markdownHtml(body.join("\n"))}</blockquote>`)
      continue
    }
    const listKind = bullet.test(line) ? "ul" : numbered.test(line) ? "ol" : undefined
    if (listKind !== undefined) {
      flush()
      const item = listKind === "ul" ? bullet : numbered
      const items: Array<string> = []
      while (i < lines.length && item.test(lines[i]!)) {
        const parts = [item.exec(lines[i++]!)![1]!]
        // a lazy continuation: an indented line that is no new item
        while (i < lines.length && /^\s+\S/.test(lines[i]!) && !item.test(lines[i]!)) parts.push(lines[i++]!.trim())
        items.push(`<li>${inline(parts.join("\n"))}</li>`)
      }
      out.push(`<${listKind}>${items.join("")}</${listKind}>`)
      continue
    }
    paragraph.push(line)
    i++
  }
  flush()
  return out.join("\n")
}
