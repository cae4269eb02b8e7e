/**
 * proxy: the README's nginx `auth_request` and Caddy `forward_auth` recipes, run by the real
 * programs in front of the node, beside the same proxies straight to the same backend
 * (bench/lib/proxies.ts); every answer on a recipe's path judged. Target: each recipe ≥ 0.5×
 * its proxy alone, 0 wrong.
 */
import { string } from '../lib/args.js'
import type { Kit } from '../lib/kit/kit.js'
import { proxiedChat, proxiesMissing, proxySection, startProxyRig, type ProxyRig } from '../lib/proxies.js'
import { defineKitPart } from '../lib/scenario.js'

const rigs = new WeakMap<Kit, ProxyRig>()

export default defineKitPart({
  name: 'proxy',
  description: "the README's nginx and Caddy recipes in front of the node vs the same proxies alone (≥ 0.5×, 0 wrong); needs nginx and caddy",
  options: {
    proxyReadme: string("the README whose recipes run (default: the repository's), e.g. an older one for a before and after"),
  },
  smoke: true,
  async prepare(kit, opts) {
    if (!kit.main) return kit.skip('proxy', 'it runs in front of a node the kit starts')
    const missing = proxiesMissing()
    if (missing) return kit.skip('proxy', missing)
    const rig = await startProxyRig(kit.main.url, opts.proxyReadme)
    kit.ctx.defer(() => rig.stop())
    rigs.set(kit, rig)
  },
  async round(kit, _opts, round) {
    const rig = rigs.get(kit)
    for (const path of rig?.paths ?? []) await kit.measured(path.key, `${path.label} r${round}`, () => proxiedChat(kit.ds, path), [path.url], path.checked ? kit.main : rig!.backend)
  },
  sections: (view) => [proxySection(view.results)],
})
