// The wire codec's public surface. `EdnsOption` is both the option-code constants (value) and the
// option record type (type), as in their home modules.
import type { EdnsOption as EdnsOptionRecord } from './types.ts';

export type {
  Question, CharString, AData, NameData, SOAData, MXData, TXTData, HINFOData, SRVData, CAAData,
  NAPTRData, DSData, DNSKEYData, RRSIGData, NSECData, NSEC3Data, NSEC3PARAMData, TLSAData, SvcParam,
  SVCBData, OpaqueData, RData, ResourceRecord, Edns, Message,
} from './types.ts';
export type EdnsOption = EdnsOptionRecord;
export * from './constants.ts';
export * from './name.ts';
export * from './ip.ts';
export { WireError } from './error.ts';
export { decodeMessage, decodeQuestionFast } from './decode.ts';
export type { QueryFacts } from './decode.ts';
export { encodeMessage, messageLength, optLength } from './encode.ts';
export { encodeWithin } from './truncate.ts';
export { newMessage, replyTo, newQuery } from './message.ts';
export {
  formatRecord, formatRdata, formatQuestion, formatMessage, parseRecord, charString, charStringToText,
  formatSigTime, toHex,
} from './text.ts';
