// The little Markdown the API's descriptions use, as React elements (never innerHTML):
// `code`, **bold**, *emphasis* and [links](https://…) (http, https and same-origin paths only).
import type { ReactNode } from 'react';

const TOKEN = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\[([^\]]+)\]\(([^)\s]+)\)/g;

const safeHref = (href: string) => /^(https?:\/\/|\/(?!\/))/i.test(href);

function renderInline(text: string): ReactNode[] {
  const nodes: ReactNode[] = [];
  let last = 0;
  let key = 0;
  for (const match of text.matchAll(TOKEN)) {
    const at = match.index ?? 0;
    if (at > last) nodes.push(text.slice(last, at));
    const [whole, code, bold, em, linkText, href] = match;
    if (code !== undefined) nodes.push(<code key={key++}>{code}</code>);
    else if (bold !== undefined) nodes.push(<strong key={key++}>{bold}</strong>);
    else if (em !== undefined) nodes.push(<em key={key++}>{em}</em>);
    else if (linkText !== undefined && href !== undefined && safeHref(href))
      nodes.push(
        <a key={key++} href={href} target={href.startsWith('/') ? undefined : '_blank'} rel="noreferrer noopener">
          {linkText}
        </a>,
      );
    else nodes.push(whole);
    last = at + whole.length;
  }
  if (last < text.length) nodes.push(text.slice(last));
  return nodes;
}

/** A description: paragraphs split on blank lines, inline Markdown within. */
export function Markdown({ text, className }: { text: string; className?: string }) {
  const paragraphs = text.split(/\n\s*\n/).filter((p) => p.trim());
  if (paragraphs.length <= 1) return <span className={className}>{renderInline(text)}</span>;
  return (
    <div className={className}>
      {paragraphs.map((p, i) => (
        <p key={i}>{renderInline(p)}</p>
      ))}
    </div>
  );
}
