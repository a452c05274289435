// A lexical token of a Corefile (caddy's caddyfile.Token).

export interface Token {
  /** The token text, without enclosing quotes; env references substituted once parsed. */
  text: string;
  /**
   * The file the token came from: the Corefile path exactly as given for the main
   * file, the absolute path for imported files.
   */
  file: string;
  /** The line the token started on (1-based). */
  line: number;
}
