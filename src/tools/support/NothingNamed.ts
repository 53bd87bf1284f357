/**
 * What read tells a name that names nothing the caller may read: a run (or anything) that is not
 * there, or not theirs to see, alike. The pages answer it 404 (isNothingNamed), as they answer a
 * run that does not exist on its run page. A module of its own: the CGI's receipt bundle holds
 * the CGI adapter, which asks it, and no tool but receipt.
 */
export const nothingNamed = (what: string): string => `no post, ticket, check-in or file named ${what} that you may read`

export const isNothingNamed = (message: string | undefined): boolean =>
  message !== undefined && /^no post, ticket, check-in or file named \S+ that you may read$/.test(message)
