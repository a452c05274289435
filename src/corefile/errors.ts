// Errors raised while reading a Corefile. `message` is exactly CoreDNS's text.

export class CorefileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CorefileError';
  }
}
