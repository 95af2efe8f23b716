//! SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH and PUBSUB.

use super::Ctx;

fn confirm(ctx: &mut Ctx<'_, '_>, kind: &[u8], name: Option<&[u8]>) {
    let count = ctx.conn.channels.len() + ctx.conn.patterns.len();
    ctx.conn
        .client
        .subscriptions
        .store(count, std::sync::atomic::Ordering::Relaxed);
    resp::reply::push_len(ctx.out, 3, ctx.conn.version);
    ctx.bulk(kind);
    match name {
        Some(n) => ctx.bulk(n),
        None => ctx.nil(),
    }
    ctx.int(count as i64);
}

pub fn subscribe(ctx: &mut Ctx<'_, '_>) {
    for i in 1..ctx.argc() {
        let channel = ctx.args.get(i);
        if ctx.shared.pubsub.subscribe(channel, &ctx.conn.client) {
            ctx.conn.channels.push(channel.to_vec());
        }
        confirm(ctx, b"subscribe", Some(channel));
    }
}

pub fn psubscribe(ctx: &mut Ctx<'_, '_>) {
    for i in 1..ctx.argc() {
        let pattern = ctx.args.get(i);
        if ctx.shared.pubsub.psubscribe(pattern, &ctx.conn.client) {
            ctx.conn.patterns.push(pattern.to_vec());
        }
        confirm(ctx, b"psubscribe", Some(pattern));
    }
}

pub fn unsubscribe(ctx: &mut Ctx<'_, '_>) {
    let names: Vec<Vec<u8>> = if ctx.argc() > 1 {
        ctx.args.tail(1).map(<[u8]>::to_vec).collect()
    } else {
        ctx.conn.channels.clone()
    };
    if names.is_empty() {
        return confirm(ctx, b"unsubscribe", None);
    }
    for channel in names {
        ctx.shared.pubsub.unsubscribe(&channel, ctx.conn.client.id);
        ctx.conn.channels.retain(|c| *c != channel);
        confirm(ctx, b"unsubscribe", Some(&channel));
    }
}

pub fn punsubscribe(ctx: &mut Ctx<'_, '_>) {
    let names: Vec<Vec<u8>> = if ctx.argc() > 1 {
        ctx.args.tail(1).map(<[u8]>::to_vec).collect()
    } else {
        ctx.conn.patterns.clone()
    };
    if names.is_empty() {
        return confirm(ctx, b"punsubscribe", None);
    }
    for pattern in names {
        ctx.shared.pubsub.punsubscribe(&pattern, ctx.conn.client.id);
        ctx.conn.patterns.retain(|p| *p != pattern);
        confirm(ctx, b"punsubscribe", Some(&pattern));
    }
}

pub fn publish(ctx: &mut Ctx<'_, '_>) {
    let n = ctx.shared.pubsub.publish(ctx.arg(1), ctx.arg(2));
    ctx.int(n as i64)
}

pub fn pubsub(ctx: &mut Ctx<'_, '_>) {
    match super::lower(ctx.arg(1)).as_str() {
        "channels" if ctx.argc() <= 3 => {
            let pattern = (ctx.argc() == 3).then(|| ctx.args.get(2));
            let channels = ctx.shared.pubsub.channels(pattern);
            ctx.array(channels.len());
            channels.iter().for_each(|c| ctx.bulk(c));
        }
        "numsub" => {
            ctx.array(2 * (ctx.argc() - 2));
            for i in 2..ctx.argc() {
                let channel = ctx.args.get(i);
                ctx.bulk(channel);
                ctx.int(ctx.shared.pubsub.numsub(channel) as i64);
            }
        }
        "numpat" if ctx.argc() == 2 => ctx.int(ctx.shared.pubsub.numpat() as i64),
        "channels" | "numpat" => {
            let sub = super::lower(ctx.arg(1));
            ctx.err(format!("ERR wrong number of arguments for 'pubsub|{sub}' command").as_bytes())
        }
        _ => {
            let sub = String::from_utf8_lossy(ctx.arg(1)).into_owned();
            ctx.err(format!("ERR unknown subcommand '{sub}'. Try PUBSUB HELP.").as_bytes())
        }
    }
}
