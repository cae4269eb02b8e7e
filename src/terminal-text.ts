/**
 * Text fit for a terminal. What the CLI prints can hold a server's words (an error body, a
 * company's name, a redirect's Location), and a control character among them would act on
 * the terminal instead of showing: ESC and U+009B (CSI) start escape sequences (colours,
 * clearing the screen, setting the title), CR and BS overwrite what was printed, a bidi
 * override reverses what follows. Each such character is printed as a visible `\uXXXX`,
 * which inside a JSON string reads back as the same character.
 */

/** C0 but tab and line feed, DEL, C1, the bidi controls, and the line and paragraph separators */
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

export function printable(text: string): string {
  return text.replace(UNSAFE, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/**
 * Text set apart from the log lines around it on a terminal: a frame down its left side,
 * with a rule above and below. What a person must not miss (a secret shown once) then does
 * not read as one more log line.
 */
export function framed(text: string): string {
  const lines = text.replace(/^\n+|\n+$/g, '').split('\n')
  const rule = '─'.repeat(Math.min(72, Math.max(40, ...lines.map((line) => line.length + 2))))
  return ['', `┌${rule}`, ...lines.map((line) => (line === '' ? '│' : `│ ${line}`)), `└${rule}`, ''].join('\n')
}
