/**
 * Runs the kit's parts on one deployment: each part's preparation, then the interleaved
 * rounds (bare Fastify, the naive verifier, then every part's runs, in registry order), then
 * each part's later phases, then the deployment's section of the report.
 */
import { resolve, type ParsedArgs } from '../args.js'
import type { Section } from '../report.js'
import type { Context, KitPart } from '../scenario.js'
import { verifyHot } from '../workloads.js'
import { Kit } from './kit.js'
import { KIT_OPTIONS } from './options.js'
import { kitSections, type SelectedPart } from './table.js'

export interface KitOutcome {
  sections: Section[]
  /** parts that found they could not run here, and why */
  skipped: Record<string, string>
}

export async function runKit(ctx: Context<unknown>, parts: KitPart[], given: ParsedArgs['given']): Promise<KitOutcome> {
  const started = Date.now()
  const opts = resolve(KIT_OPTIONS, given, ctx.smoke)
  const selected: SelectedPart[] = parts.map((part) => ({ part, opts: resolve({ ...KIT_OPTIONS, ...part.options }, given, ctx.smoke) }))
  const kit = new Kit(ctx, opts, {
    needsSql: parts.some((part) => part.needsSql),
    mainEnv: Object.assign({}, ...selected.map(({ part, opts }) => part.mainEnv?.(opts) ?? {})),
  })
  await kit.open()
  for (const { part, opts } of selected) await part.prepare?.(kit, opts)
  for (let round = 1; round <= opts.rounds; round++) {
    ctx.log(`round ${round}/${opts.rounds}`)
    const r = `r${round}`
    await kit.measured('bare', `bare fastify ${r}`, () => verifyHot(kit.ds), [kit.bare.url], kit.bare)
    if (kit.naive) await kit.measured('naive', `naive verifier ${r}`, () => verifyHot(kit.ds), [kit.naive.url], kit.naive)
    for (const { part, opts } of selected) await part.round?.(kit, opts, round)
  }
  for (const { part, opts } of selected) await part.after?.(kit, opts)
  const active = selected.filter(({ part }) => !(part.name in kit.skipped))
  return { sections: kitSections(kit, active, (Date.now() - started) / 1000), skipped: kit.skipped }
}

/**
 * The deployments the named parts need: one, but for a part that changes what the others
 * would judge by (`apart`), which gets one of its own with the parts it is compared with.
 */
export function kitGroups(parts: KitPart[]): KitPart[][] {
  const apart = parts.filter((part) => part.apart)
  const others = parts.filter((part) => !part.apart)
  if (apart.length === 0 || others.every((part) => apart.every((a) => a.apart!.includes(part.name)))) return [parts]
  const groups = [others]
  for (const a of apart) groups.push([...others.filter((part) => a.apart!.includes(part.name) && a.requires?.includes(part.name)), a])
  return groups
}
