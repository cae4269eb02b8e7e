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
